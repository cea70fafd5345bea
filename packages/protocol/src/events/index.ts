/**
 * The event catalog of the Agent Runtime standard as OAR emits it: the closed type list, the camelCase envelope,
 * typed payloads, OAR's profile rules (a superset of the Lime profile's) and the `createEvent` builder.
 * See docs/events.md.
 */
export * from './catalog.js';
export * from './envelope.js';
export * from './history-payloads.js';
export * from './job-payloads.js';
export * from './output-payloads.js';
export * from './payloads.js';
export * from './profile.js';
export * from './rules.js';
export * from './runtime-event.js';
