// Answers of the API, recorded from the contract tier (the API in-process against a real
// kube-apiserver) on 2026-11-28, that the backup and rotation components' tests are written
// against: the console's browser tests cannot provision a cluster (its control plane needs the
// real node), so these stand for a provisioned cluster as its owner reads it. The backups'
// status was written as the operator writes it; everything else is the API's own answer.

import type { Cluster } from "./ClusterPage";
import type { V3EtcdBackup } from "./etcdbackups";

export const PROVISIONED: Cluster & { type: string } = {
  "id": "c-m-8sv65gwv",
  "type": "cluster",
  "name": "rec-h27c",
  "driver": "rke2",
  "state": "pending",
  "transitioning": "yes",
  "transitioningMessage": "",
  "links": {
    "self": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv",
    "update": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv",
    "remove": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv",
    "nodes": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv/nodes",
    "projects": "https://corral.contract.test/v3/projects?clusterId=c-m-8sv65gwv"
  },
  "actions": {
    "generateKubeconfig": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv?action=generateKubeconfig",
    "backupEtcd": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv?action=backupEtcd",
    "restoreFromEtcdBackup": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv?action=restoreFromEtcdBackup",
    "rotateCertificates": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv?action=rotateCertificates"
  },
  "status": {
    "conditions": []
  }
};

export const ACTIVE: V3EtcdBackup = {
  "id": "c-m-8sv65gwv:c-m-8sv65gwv-20261128101500",
  "type": "etcdBackup",
  "name": "c-m-8sv65gwv-20261128101500",
  "clusterId": "c-m-8sv65gwv",
  "manual": true,
  "filename": "c-m-8sv65gwv-20261128101500.db",
  "location": "pvc://c-m-8sv65gwv/etcd-backups/c-m-8sv65gwv-20261128101500.db",
  "createdAt": "2026-11-28T10:15:00Z",
  "kubernetesVersion": "v1.36.3",
  "etcdVersion": "",
  "size": 2228256,
  "revision": 0,
  "state": "active",
  "transitioning": "no",
  "transitioningMessage": "",
  "links": {
    "self": "https://corral.contract.test/v3/etcdBackups/c-m-8sv65gwv:c-m-8sv65gwv-20261128101500",
    "remove": "https://corral.contract.test/v3/etcdBackups/c-m-8sv65gwv:c-m-8sv65gwv-20261128101500",
    "cluster": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv"
  },
  "actions": {}
};

export const ACTIVATING: V3EtcdBackup = {
  "id": "c-m-8sv65gwv:c-m-8sv65gwv-20261128111500",
  "type": "etcdBackup",
  "name": "c-m-8sv65gwv-20261128111500",
  "clusterId": "c-m-8sv65gwv",
  "manual": true,
  "filename": "c-m-8sv65gwv-20261128111500.db",
  "location": "pvc://c-m-8sv65gwv/etcd-backups/c-m-8sv65gwv-20261128111500.db",
  "createdAt": "2026-11-28T11:15:00Z",
  "kubernetesVersion": "v1.36.3",
  "etcdVersion": "",
  "size": 0,
  "revision": 0,
  "state": "activating",
  "transitioning": "yes",
  "transitioningMessage": "taking the snapshot",
  "links": {
    "self": "https://corral.contract.test/v3/etcdBackups/c-m-8sv65gwv:c-m-8sv65gwv-20261128111500",
    "remove": "https://corral.contract.test/v3/etcdBackups/c-m-8sv65gwv:c-m-8sv65gwv-20261128111500",
    "cluster": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv"
  },
  "actions": {}
};

export const FAILED: V3EtcdBackup = {
  "id": "c-m-8sv65gwv:c-m-8sv65gwv-20261128103000",
  "type": "etcdBackup",
  "name": "c-m-8sv65gwv-20261128103000",
  "clusterId": "c-m-8sv65gwv",
  "manual": true,
  "filename": "c-m-8sv65gwv-20261128103000.db",
  "location": "pvc://c-m-8sv65gwv/etcd-backups/c-m-8sv65gwv-20261128103000.db",
  "createdAt": "2026-11-28T10:30:00Z",
  "kubernetesVersion": "v1.36.3",
  "etcdVersion": "",
  "size": 0,
  "revision": 0,
  "state": "failed",
  "transitioning": "error",
  "transitioningMessage": "etcdctl snapshot save: context deadline exceeded",
  "links": {
    "self": "https://corral.contract.test/v3/etcdBackups/c-m-8sv65gwv:c-m-8sv65gwv-20261128103000",
    "remove": "https://corral.contract.test/v3/etcdBackups/c-m-8sv65gwv:c-m-8sv65gwv-20261128103000",
    "cluster": "https://corral.contract.test/v3/clusters/c-m-8sv65gwv"
  },
  "actions": {}
};
