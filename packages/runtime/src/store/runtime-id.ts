import { newId } from '../kernel/ids.js';
import type { Store } from './store.js';

/** The installation's runtime id: created once per store; concurrent first starts agree on whichever was written. */
export async function storedRuntimeId(store: Store): Promise<string> {
  await store.db
    .insertInto('oar_state')
    .values({
      scope: 'runtime',
      key: 'runtime_id',
      value: JSON.stringify(newId('rt')),
      updated_at: new Date().toISOString(),
    })
    .onConflict((oc) => oc.columns(['scope', 'key']).doNothing())
    .execute();
  const stored = await store.db
    .selectFrom('oar_state')
    .select('value')
    .where('scope', '=', 'runtime')
    .where('key', '=', 'runtime_id')
    .executeTakeFirstOrThrow();
  return JSON.parse(stored.value) as string;
}
