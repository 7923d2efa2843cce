// What-if shim (bench/variants/hook.ts, "nowatch"): agent/files/volume/dirwatch.ts's VolumeDirWatcher
// with no watch at all. The agent still writes on every pod event and at start-up (the
// bench creates every volume directory before the agent starts), but no directory event
// ever reaches it: no inotify watch, no event callback, no stamp check (lstat) of its own
// renames. It shows what the directory watcher still costs; self-heal and "files within
// a second of the kubelet creating the directory" are gone with it.

// Structurally agent/files/volume/dirwatch.ts's DirWatcher (not imported: this file is compiled alone).
export class VolumeDirWatcher {
  watch(): void {}
  unwatch(): void {}
  async close(): Promise<void> {}
}
