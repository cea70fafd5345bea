import type { ActionScope } from '../facts/action.js';
import type { Engine } from './engine.js';

/** Everything an executor needs about the one action it runs. */
export interface ActionContext extends ActionScope {
  engine: Engine;
  signal: AbortSignal;
}
