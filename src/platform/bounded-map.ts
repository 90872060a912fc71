/**
 * Sets `key` as the map's newest entry (moved behind the others when it was there already) and forgets the oldest
 * entries beyond `capacity`: a Map keeps insertion order, so its first key is the one set longest ago.
 */
export function setNewest<K, V>(map: Map<K, V>, key: K, value: V, capacity: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > capacity) map.delete(map.keys().next().value as K);
}
