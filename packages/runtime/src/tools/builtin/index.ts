import type { AnyTool } from '../tool.js';
import { editTool } from './edit.js';
import { globTool } from './glob.js';
import { grepTool } from './grep.js';
import { readTool } from './read.js';
import { writeTool } from './write.js';

export { editTool } from './edit.js';
export { globTool } from './glob.js';
export { grepTool } from './grep.js';
export { readTool } from './read.js';
export { writeTool } from './write.js';

/** The built-in workspace file tools, confined to `ToolContext.workspaceRoot`. A fresh array: callers may filter it. */
export function workspaceTools(): AnyTool[] {
  return [readTool, globTool, grepTool, writeTool, editTool];
}
