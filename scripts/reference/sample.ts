// One example pod for the reference's examples: a Deployment's pod on node-1, its chain
// walked to the top. The pages render it with the projections' own code, so the examples
// are byte for byte what the agent writes for such a pod.

import type { ControllerChain, NodeRef, OwnerReference, PodMeta } from '../../projections/index.ts';

const replicaSet: OwnerReference = {
  apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d4b9c8f6d', uid: '6be1683f-da9c-4f68-9440-82376231cfa6', controller: true, blockOwnerDeletion: true,
};
const deployment: OwnerReference = {
  apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: '2f0c5c1e-8a4b-4d7e-9b1a-3c6d2e9f0a17', controller: true, blockOwnerDeletion: true,
};

export const SAMPLE_POD: PodMeta = {
  metadata: { name: 'web-7d4b9c8f6d-x2k8p', namespace: 'shop', uid: '0d1f3b2a-5c6e-4f70-8a9b-1c2d3e4f5a6b', ownerReferences: [replicaSet] },
};

export const SAMPLE_OWNERS: readonly OwnerReference[] = [replicaSet];

export const SAMPLE_CHAIN: ControllerChain = {
  items: [replicaSet, deployment],
  end: { reason: 'Top', message: 'Deployment web has no controlling owner' },
};

export const SAMPLE_NODE: NodeRef = { name: 'node-1', uid: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d' };
