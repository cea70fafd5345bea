import { readFile } from 'node:fs/promises';
import { type OarError, oarError } from '@oar/protocol';

/** A usage fault: the CLI prints the structured error on stderr and exits 2. */
export class UsageError extends Error {
  constructor(readonly error: OarError) {
    super(error.message);
  }
}

/** Read a file argument, or standard input for "-" (and when no file is given). */
export async function readInput(file: string | undefined): Promise<string> {
  if (file === undefined || file === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    throw new UsageError(
      oarError('file_unreadable', `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, {
        details: { file },
      }),
    );
  }
}

export async function readJsonFile(file: string, what: string): Promise<unknown> {
  const text = await readInput(file);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      oarError('invalid_json', `${what} ${file} is not valid JSON: ${(error as Error).message}`, { details: { file } }),
    );
  }
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
