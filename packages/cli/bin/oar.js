#!/usr/bin/env node
import { main } from '../dist/main.js';

// `oar events … | head` closes the pipe early; that is the reader's choice, not an error.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

process.exitCode = await main(process.argv.slice(2));
