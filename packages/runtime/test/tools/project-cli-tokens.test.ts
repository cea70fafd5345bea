import { type Catalog, type CatalogTool, estimateTokens } from '@oar/protocol';
import { defineCli, type Manifest, manifestOf, method } from '@oar/tool-cli';
import { encode } from 'gpt-tokenizer';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CliToolConfigSchema } from '../../src/config/cli.js';
import { systemPrompt } from '../../src/loop/context/context.js';
import { cliTool } from '../../src/tools/cli/cli-tool.js';
import { ToolRegistry } from '../../src/tools/registry.js';

/**
 * What project_cli costs in the prompt, against "one tool per method". Both catalogs are rendered by the real
 * system prompt (loop/context/context.ts) from real catalog entries (ToolRegistry), and the "## Tools" section is counted
 * with OAR's estimator and with gpt-tokenizer (o200k). The manifests are synthetic, built with the SDK from zod
 * schemas shaped like examples/business-cli (its nine methods), so the JSON Schemas are what a real CLI describes.
 */

const DateTime = z.iso.datetime({ offset: true });
const Id = z.string().min(1).max(100);
const facts = {
  readOnly: false,
  destructive: false,
  idempotent: true,
  concurrencySafe: false,
  interrupt: 'block' as const,
};

/** The example's nine methods: calendar (7), contacts (1), memory (1), with its descriptions and schemas. */
const NINE = {
  calendar: {
    read: {
      description:
        'Events of a day (date, as written in each event’s own offset), of a range (start_at..end_at, overlapping), or one event (event_id); day and range also list pending invites to you',
      input: z.strictObject({
        mode: z.enum(['day', 'range', 'event']),
        date: z.iso.date().optional(),
        start_at: DateTime.optional(),
        end_at: DateTime.optional(),
        event_id: Id.optional(),
      }),
    },
    create: {
      description: 'Create an event (times need an offset; end_at after start_at)',
      input: z.strictObject({
        title: z.string().trim().min(1).max(200),
        start_at: DateTime,
        end_at: DateTime,
        location: z.string().max(200).optional(),
        attendees: z.array(z.email()).max(50).optional(),
      }),
    },
    update: {
      description: 'Change the title, times or location of one of your events (the fields given; the rest stay)',
      input: z.strictObject({
        event_id: Id,
        title: z.string().trim().min(1).max(200).optional(),
        start_at: DateTime.optional(),
        end_at: DateTime.optional(),
        location: z.string().max(200).optional(),
      }),
    },
    delete: {
      description: 'Delete one of your events (and withdraw its invites); deleting it again is a no-op',
      input: z.strictObject({ event_id: Id }),
    },
    share: {
      description: 'Invite people (email addresses) to one of your events; invalid addresses are reported as not done',
      input: z.strictObject({ event_id: Id, with: z.array(z.string().max(320)).min(1).max(50) }),
    },
    accept_invite: {
      description: 'Accept an invite addressed to you (invite_id from calendar.read); accepting again is a no-op',
      input: z.strictObject({ invite_id: Id }),
    },
    reject_invite: {
      description: 'Decline an invite addressed to you (invite_id from calendar.read); declining again is a no-op',
      input: z.strictObject({ invite_id: Id }),
    },
  },
  contacts: {
    read: {
      description: 'Your contacts: all, those whose name, email or organization contains query, or one by contact_id',
      input: z.strictObject({ query: z.string().trim().min(1).max(100).optional(), contact_id: Id.optional() }),
    },
  },
  memory: {
    update: {
      description: 'Set one of your memory notes (key → value); setting the same value again is a no-op',
      input: z.strictObject({ key: z.string().trim().min(1).max(100), value: z.string().max(4000) }),
    },
  },
};

type Methods = Record<string, Record<string, { description: string; input: z.ZodType }>>;

/** A manifest with every method of `modules`, or each repeated `copies` times (`read`, `read_2`, …). */
function manifest(modules: Methods, copies = 1): Manifest {
  return manifestOf(
    defineCli({
      name: 'business-cli',
      version: '0.1.0',
      description: 'Example business CLI: calendar events and invites, contacts, memory notes (its own SQLite store)',
      credential: { algorithm: 'HS256', keyEnv: 'BUSINESS_CLI_KEY' },
      modules: Object.fromEntries(
        Object.entries(modules).map(([module, methods]) => [
          module,
          Object.fromEntries(
            Object.entries(methods).flatMap(([name, m]) =>
              Array.from({ length: copies }, (_, i) => [
                i === 0 ? name : `${name}_${i + 1}`,
                method({ description: m.description, input: m.input, facts, handler: () => null }),
              ]),
            ),
          ),
        ]),
      ),
    }),
  );
}

const config = CliToolConfigSchema.parse({
  command: ['node', './cli.js'],
  allow: ['calendar.*', 'contacts.*', 'memory.*'],
});

/** project_cli's catalog entry for `m` (the whole binding allowed), as the registry builds it. */
function projectCliEntry(m: Manifest): CatalogTool {
  const allowed = m.methods.map((x) => `${x.module}.${x.method}`);
  const tool = cliTool({ config, manifest: m, allowed, skills: {}, postProcessors: {} });
  const [entry] = new ToolRegistry([tool]).catalog();
  return entry as CatalogTool;
}

/** One tool per method: its name, its description and its input schema, as a tool of its own would be listed. */
function perMethodEntries(m: Manifest): CatalogTool[] {
  return m.methods.map((x) => ({
    name: `${x.module}_${x.method}`,
    description: x.description,
    inputSchema: x.inputSchema,
    capabilities: ['business'],
  }));
}

/** The "## Tools" section of the main agent's system prompt for `tools`. */
function toolsSection(tools: CatalogTool[]): string {
  const catalog: Catalog = { tools, agents: [] };
  const prompt = systemPrompt({ name: 'main', carrier: 'tool' }, catalog);
  const start = prompt.indexOf('## Tools');
  expect(start).toBeGreaterThan(0);
  const end = prompt.indexOf('\n## ', start + 1);
  return prompt.slice(start, end < 0 ? undefined : end);
}

const count = (text: string) => ({ oar: estimateTokens(text), o200k: encode(text).length });

describe('project_cli in the prompt', () => {
  it('costs the same for 9 and 90 methods, and far less than one tool per method', () => {
    const nine = manifest(NINE);
    const ninety = manifest(NINE, 10);
    expect(nine.methods).toHaveLength(9);
    expect(ninety.methods).toHaveLength(90);
    // The same modules either way.
    const modules = (m: Manifest) => [...new Set(m.methods.map((x) => x.module))];
    expect(modules(ninety)).toEqual(modules(nine));

    const cli9 = toolsSection([projectCliEntry(nine)]);
    const cli90 = toolsSection([projectCliEntry(ninety)]);
    const per9 = toolsSection(perMethodEntries(nine));
    const per90 = toolsSection(perMethodEntries(ninety));

    // It does not grow with the method count: the very same text.
    expect(cli90).toBe(cli9);
    expect(count(cli90)).toEqual(count(cli9));
    const cli = count(cli9);
    const perNine = count(per9);
    const perNinety = count(per90);
    // Far below one tool per method for the example's nine methods (measured about 1/9 by the estimate, 1/13 by o200k; asserted at under 1/5).
    expect(cli.oar * 5).toBeLessThan(perNine.oar);
    expect(cli.o200k * 5).toBeLessThan(perNine.o200k);
    expect(perNinety.o200k).toBeGreaterThan(perNine.o200k * 9);

    console.log(
      `project_cli catalog tokens (OAR estimate / o200k): project_cli 9 methods ${cli.oar}/${cli.o200k}, 90 methods ${count(cli90).oar}/${count(cli90).o200k}; one tool per method: 9 methods ${perNine.oar}/${perNine.o200k}, 90 methods ${perNinety.oar}/${perNinety.o200k}`,
    );
  });
});
