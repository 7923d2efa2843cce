// What-if shim (bench/variants/hook.ts, "poolfs"): the writer's memory-backed volumes go
// through libuv's thread pool like disk-backed ones, to measure what the inline calls on tmpfs
// save (docs/contributing/benchmarks.md, "The variants"). The hook loads this module in place
// of agent/files/volume/fsops for the writer only, passing the real module's URL: both call sets
// are then the agent's own thread-pool set, nothing re-implemented here.

const real = new URL(import.meta.url).searchParams.get('real');
if (!real) throw new Error('poolfs: loaded without ?real=<agent/files/volume/fsops URL>');
const fsops = (await import(real)) as { threadPoolOps: unknown };

export const threadPoolOps = fsops.threadPoolOps;
export const inlineOps = fsops.threadPoolOps;
