// JSON merge patches with @kubernetes/client-node (it defaults to JSON Patch).
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
