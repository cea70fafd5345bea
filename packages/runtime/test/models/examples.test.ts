import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  AGENT_PROTOCOL_TOOL_NAME,
  type CatalogInput,
  carrierParametersJsonSchema,
  parseAssistantText,
  parseToolCall,
} from '@oar/protocol';
import { generateText, jsonSchema, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { resolveModel } from '../../src/models/resolve.js';
import { loadModelScript } from '../../src/models/script.js';

/** The documented example scripts must stay loadable and say what their descriptions claim. */
const repoRoot = resolve(import.meta.dirname, '../../../..');
const dir = resolve(repoRoot, 'examples/scripts');
const catalog = JSON.parse(readFileSync(resolve(repoRoot, 'examples/catalog.json'), 'utf8')) as CatalogInput;
const tools = {
  [AGENT_PROTOCOL_TOOL_NAME]: tool({
    description: 'Declare what the runtime should do next.',
    inputSchema: jsonSchema<Record<string, unknown>>(carrierParametersJsonSchema()),
  }),
};

describe('examples/scripts', () => {
  it.each(readdirSync(dir).filter((name) => name.endsWith('.json')))('%s is a valid model script', async (name) => {
    const script = await loadModelScript(resolve(dir, name));
    expect(script.steps.length).toBeGreaterThan(0);
  });

  it('read-and-answer.json acts with a valid read of README.md, then answers', async () => {
    const { model } = await resolveModel('script:examples/scripts/read-and-answer.json', { cwd: repoRoot, env: {} });
    const first = await generateText({ model, tools, prompt: 'What is in the README?' });
    const act = parseToolCall(first.toolCalls[0]?.input, { catalog });
    expect(act.errors).toEqual([]);
    expect(act.ok).toBe(true);
    expect(first.toolCalls[0]?.input).toMatchObject({
      kind: 'act',
      calls: [{ name: 'read', args: { filePath: 'README.md' } }],
    });
    const second = await generateText({ model, tools, prompt: 'The read result.' });
    expect(parseToolCall(second.toolCalls[0]?.input, { catalog }).ok).toBe(true);
    expect(second.toolCalls[0]?.input).toMatchObject({ kind: 'answer' });
  });

  it('recovery.json scripts the DSL in text as a declaration the protocol parser accepts', async () => {
    const script = await loadModelScript(resolve(dir, 'recovery.json'));
    const text = script.steps.find((step) => step.text !== undefined)?.text ?? '';
    const outcome = parseAssistantText(text, { catalog });
    expect(outcome.errors).toEqual([]);
    expect(outcome.ok).toBe(true);
  });
});
