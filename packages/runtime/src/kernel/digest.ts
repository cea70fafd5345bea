import { createHash } from 'node:crypto';

/** The SHA-256 of some bytes as lower-case hex: how artifacts, file versions and rollbacks name a content. */
export const sha256Hex = (bytes: Uint8Array | string): string => createHash('sha256').update(bytes).digest('hex');
