import { describe, expect, it } from 'vitest';
import type { ControllerChain, OwnerReference } from '../../projections/index.ts';
import { controllerOf, otelResourceAttributes, workloadOf } from '../../projections/workload.ts';

const ref = (apiVersion: string, kind: string, name: string, controller = true): OwnerReference => ({ apiVersion, kind, name, uid: `uid-${name}`, controller });
const rs = ref('apps/v1', 'ReplicaSet', 'web-5d4f8c9b7');
const deploy = ref('apps/v1', 'Deployment', 'web');
const job = ref('batch/v1', 'Job', 'backup-29000000');
const cron = ref('batch/v1', 'CronJob', 'backup');
const chain = (items: OwnerReference[], reason: ControllerChain['end']['reason']): ControllerChain => ({ items, end: { reason, message: '' } });

describe('the workload', () => {
  it.each([
    { what: 'a Deployment\'s pod: the Deployment', c: chain([rs, deploy], 'Top'), want: { kind: 'Deployment', name: 'web', uid: 'uid-web' } },
    { what: 'a bare ReplicaSet\'s pod: the ReplicaSet', c: chain([rs], 'Top'), want: { kind: 'ReplicaSet', name: rs.name, uid: rs.uid } },
    { what: 'a CronJob\'s pod: the CronJob', c: chain([job, cron], 'Top'), want: { kind: 'CronJob', name: 'backup', uid: 'uid-backup' } },
    { what: 'a pod no controller owns: none', c: chain([], 'NoController'), want: { kind: '', name: '', uid: '' } },
    ...(['Pending', 'Forbidden', 'NotFound', 'UIDMismatch', 'KindNotFollowed', 'NotServed', 'Unavailable', 'Cycle', 'TooLong'] as const).map((reason) => ({
      what: `a chain that ends ${reason}: never a guess`, c: chain([rs], reason), want: { kind: `(unresolved: ${reason})`, name: `(unresolved: ${reason})`, uid: `(unresolved: ${reason})` },
    })),
  ])('$what', ({ c, want }) => {
    expect(workloadOf(c)).toEqual(want);
  });

  it('the controller is the pod\'s own controlling owner, or none', () => {
    expect(controllerOf([ref('v1', 'ConfigMap', 'c', false), rs])).toEqual({ kind: 'ReplicaSet', name: rs.name, uid: rs.uid });
    expect(controllerOf([ref('v1', 'ConfigMap', 'c', false)])).toEqual({ kind: '', name: '', uid: '' });
  });
});

describe('OTEL_RESOURCE_ATTRIBUTES', () => {
  it.each([
    { what: 'a Deployment\'s pod, nearest first', c: chain([rs, deploy], 'Top'),
      want: `k8s.replicaset.name=${rs.name},k8s.replicaset.uid=uid-${rs.name},k8s.deployment.name=web,k8s.deployment.uid=uid-web` },
    { what: 'a CronJob\'s pod', c: chain([job, cron], 'Top'), want: `k8s.job.name=${job.name},k8s.job.uid=uid-${job.name},k8s.cronjob.name=backup,k8s.cronjob.uid=uid-backup` },
    { what: 'StatefulSet, DaemonSet and ReplicationController', c: chain([ref('apps/v1', 'StatefulSet', 'db')], 'Top'), want: 'k8s.statefulset.name=db,k8s.statefulset.uid=uid-db' },
    { what: 'a chain stopped early: only what is known', c: chain([rs], 'Pending'), want: `k8s.replicaset.name=${rs.name},k8s.replicaset.uid=uid-${rs.name}` },
    { what: 'a custom kind: no attribute of its own (the conventions have none)', c: chain([rs, ref('argoproj.io/v1alpha1', 'Rollout', 'r')], 'Top'), want: `k8s.replicaset.name=${rs.name},k8s.replicaset.uid=uid-${rs.name}` },
    { what: 'a kind of the same name in another group is not the built-in one', c: chain([ref('example.com/v1', 'Deployment', 'd')], 'Top'), want: '' },
    { what: 'a bare pod: none', c: chain([], 'NoController'), want: '' },
  ])('$what', ({ c, want }) => {
    expect(otelResourceAttributes(c)).toBe(want);
  });

  it('percent-encodes what a Baggage value may not hold (names from a hostile manifest, offline)', () => {
    expect(otelResourceAttributes(chain([ref('apps/v1', 'ReplicaSet', 'a,b=c; d%é')], 'Top'))).toBe('k8s.replicaset.name=a%2Cb=c%3B%20d%25%C3%A9,k8s.replicaset.uid=uid-a%2Cb=c%3B%20d%25%C3%A9');
  });
});
