/**
 * Record `key` as the most recently used entry of a Map kept in recency order (a Map iterates in insertion order,
 * so the first key is the least recently used), then forget the least recently used beyond `max`.
 */
export function setRecent<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) {
    const oldest = map.keys().next();
    if (oldest.done) break;
    map.delete(oldest.value);
  }
}
