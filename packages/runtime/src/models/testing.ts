/**
 * @oar/runtime/testing — what tests and demos need and production code does not: the scripted model (a model
 * that replays a JSON script, the fake at the model boundary) and its schema.
 */
export { createScriptedModel, SCRIPT_PROVIDER, ScriptedModel, type ScriptedModelOptions } from './script.js';
export { type ModelScript, ModelScriptSchema, type ModelScriptStep, parseModelScript } from './script-schema.js';
