import { userInfo } from 'node:os';

/**
 * Who a session acts for when nobody authenticated it: the local user running this process (`user:<name>`). Behind
 * the server a session records its creator instead (`api_key:<id>`, session.created `actor`).
 */
export function localActor(): string {
  try {
    return `user:${userInfo().username}`;
  } catch {
    // No passwd entry for this uid (some containers): the uid still names who runs it.
    return `user:uid-${process.getuid?.() ?? 'unknown'}`;
  }
}
