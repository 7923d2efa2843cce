// `node --import <compiled hook.js>`: resolves `chokidar` to ./fswatch.js for the
// benchmark's what-if variant of the agent. Nothing else changes.

import { registerHooks } from 'node:module';

const shim = new URL('./fswatch.js', import.meta.url).href;

registerHooks({
  resolve(specifier, context, next) {
    if (specifier === 'chokidar') return { url: shim, format: 'module', shortCircuit: true };
    return next(specifier, context);
  },
});
