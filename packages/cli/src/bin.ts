import { main } from './main.js';

// The `oar` binary's entry (bin/oar.js runs its bundle, scripts/package-assets.mjs).

// `oar events … | head` closes the pipe early; that is the reader's choice, not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

process.exitCode = await main(process.argv.slice(2));
