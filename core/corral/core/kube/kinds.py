"""corral's custom resources as lightkube types."""

from __future__ import annotations

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from corral.core.api.names import (
    AUTH_CONFIG,
    CLOUD_CREDENTIAL,
    CLUSTER,
    CLUSTER_REGISTRATION_TOKEN,
    CLUSTER_ROLE_TEMPLATE_BINDING,
    ETCD_BACKUP,
    GLOBAL_ROLE_BINDING,
    GROUP,
    NODE,
    NODE_DRIVER,
    NODE_POOL,
    NODE_TEMPLATE,
    PROJECT,
    PROJECT_ROLE_TEMPLATE_BINDING,
    SETTING,
    TOKEN,
    USER,
    USER_ATTRIBUTE,
    VERSION,
)

Token = create_global_resource(GROUP, VERSION, TOKEN.kind, TOKEN.plural)
User = create_global_resource(GROUP, VERSION, USER.kind, USER.plural)
GlobalRoleBinding = create_global_resource(
    GROUP, VERSION, GLOBAL_ROLE_BINDING.kind, GLOBAL_ROLE_BINDING.plural
)
Setting = create_global_resource(GROUP, VERSION, SETTING.kind, SETTING.plural)
Cluster = create_global_resource(GROUP, VERSION, CLUSTER.kind, CLUSTER.plural)
Node = create_namespaced_resource(GROUP, VERSION, NODE.kind, NODE.plural)
Project = create_namespaced_resource(GROUP, VERSION, PROJECT.kind, PROJECT.plural)
ProjectRoleTemplateBinding = create_namespaced_resource(
    GROUP, VERSION, PROJECT_ROLE_TEMPLATE_BINDING.kind, PROJECT_ROLE_TEMPLATE_BINDING.plural
)
ClusterRoleTemplateBinding = create_namespaced_resource(
    GROUP, VERSION, CLUSTER_ROLE_TEMPLATE_BINDING.kind, CLUSTER_ROLE_TEMPLATE_BINDING.plural
)
NodeDriver = create_global_resource(GROUP, VERSION, NODE_DRIVER.kind, NODE_DRIVER.plural)
NodeTemplate = create_global_resource(GROUP, VERSION, NODE_TEMPLATE.kind, NODE_TEMPLATE.plural)
CloudCredential = create_global_resource(
    GROUP, VERSION, CLOUD_CREDENTIAL.kind, CLOUD_CREDENTIAL.plural
)
NodePool = create_namespaced_resource(GROUP, VERSION, NODE_POOL.kind, NODE_POOL.plural)
AuthConfig = create_global_resource(GROUP, VERSION, AUTH_CONFIG.kind, AUTH_CONFIG.plural)
UserAttribute = create_global_resource(GROUP, VERSION, USER_ATTRIBUTE.kind, USER_ATTRIBUTE.plural)
EtcdBackup = create_namespaced_resource(GROUP, VERSION, ETCD_BACKUP.kind, ETCD_BACKUP.plural)
ClusterRegistrationToken = create_namespaced_resource(
    GROUP, VERSION, CLUSTER_REGISTRATION_TOKEN.kind, CLUSTER_REGISTRATION_TOKEN.plural
)
