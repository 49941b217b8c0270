"""The condition types of each kind and the reasons they give (docs/conditions.md).

Types are named as they are; reasons carry a `REASON_` prefix, since several reasons are
written like a type (`Ready` True `Ready`).
"""

from __future__ import annotations

# -- types --------------------------------------------------------------------------------------

PENDING = "Pending"
PROVISIONED = "Provisioned"
AGENT_DEPLOYED = "AgentDeployed"
READY = "Ready"
UPDATED = "Updated"
NO_DISK_PRESSURE = "NoDiskPressure"
NO_MEMORY_PRESSURE = "NoMemoryPressure"
INITIALIZED = "Initialized"
REGISTERED = "Registered"
DRAINED = "Drained"
BACKING_NAMESPACE_CREATED = "BackingNamespaceCreated"
CREATOR_MADE_OWNER = "CreatorMadeOwner"
INITIAL_ROLES_POPULATED = "InitialRolesPopulated"
DEFAULT_NETWORK_POLICY_CREATED = "DefaultNetworkPolicyCreated"
DOWNLOADED = "Downloaded"
INSTALLED = "Installed"

# A NodeDriver's, all written by its reconciler; `Ready` says whether machines may use it.
NODE_DRIVER_TYPES = (DOWNLOADED, INSTALLED, READY)

# All four True: the project is `active`.
PROJECT_TYPES = (
    BACKING_NAMESPACE_CREATED,
    CREATOR_MADE_OWNER,
    DEFAULT_NETWORK_POLICY_CREATED,
    INITIAL_ROLES_POPULATED,
)

# -- reasons: shared --------------------------------------------------------------------------

REASON_APPLIED = "Applied"
REASON_PENDING = "Pending"
REASON_CREATED = "Created"
REASON_CLUSTER_UNAVAILABLE = "ClusterUnavailable"

# -- reasons: Cluster -------------------------------------------------------------------------

REASON_WAITING_FOR_CREDENTIAL = "WaitingForCredential"
REASON_PROVISIONING_NOT_AVAILABLE = "ProvisioningNotAvailable"
REASON_NOT_PROVISIONED = "NotProvisioned"
REASON_CONNECTED = "Connected"
REASON_IMPORTED = "Imported"
REASON_LOCAL = "Local"
REASON_CREDENTIAL_ACCEPTED = "CredentialAccepted"
REASON_CREDENTIAL_REJECTED = "CredentialRejected"
# A cluster reached through its agent's tunnel (docs/design/cluster-agent.md, section 7).
REASON_AGENT_CONNECTED = "AgentConnected"
REASON_AGENT_DISCONNECTED = "AgentDisconnected"
REASON_UNREACHABLE = "Unreachable"
REASON_READY = "Ready"
REASON_NOT_READY = "NotReady"
REASON_STORED = "Stored"
REASON_SYNC_FAILED = "SyncFailed"
REASON_DUPLICATE_IMPORT = "DuplicateImport"
REASON_DISK_PRESSURE = "DiskPressure"
REASON_NO_DISK_PRESSURE = "NoDiskPressure"
REASON_MEMORY_PRESSURE = "MemoryPressure"
REASON_NO_MEMORY_PRESSURE = "NoMemoryPressure"

# -- reasons: Node ----------------------------------------------------------------------------

REASON_INITIALIZED = "Initialized"
REASON_PROVISIONED = "Provisioned"
REASON_REGISTERED = "Registered"
REASON_NO_READY_CONDITION = "NoReadyCondition"
REASON_APPLY_FAILED = "ApplyFailed"
REASON_DRAINED = "Drained"
REASON_DRAIN_REFUSED = "DrainRefused"
REASON_DRAIN_TIMED_OUT = "DrainTimedOut"
REASON_DRAIN_FAILED = "DrainFailed"
REASON_UNCORDONED = "Uncordoned"
REASON_CREATE_PENDING = "CreatePending"
REASON_PROVISIONING = "Provisioning"
REASON_RESTORING = "Restoring"
# A provisioned cluster's certificates are being replaced and its control plane rolled.
REASON_ROTATING_CERTIFICATES = "RotatingCertificates"
# A provisioned cluster's control plane is being replaced by that of a new Kubernetes version.
REASON_UPGRADING = "Upgrading"
REASON_MACHINE_FAILED = "MachineFailed"
REASON_WAITING_FOR_NODE = "WaitingForNode"
# A machine added over SSH (docs/conditions.md, "Machines over SSH").
REASON_INSTALLING = "Installing"
REASON_SSH_KEY_MISSING = "SSHKeyMissing"
REASON_AUTHENTICATION_FAILED = "AuthenticationFailed"
REASON_HOST_KEY_CHANGED = "HostKeyChanged"
REASON_CONTAINERD_MISSING = "ContainerdMissing"
REASON_INSTALL_FAILED = "InstallFailed"
REASON_UNINSTALL_FAILED = "UninstallFailed"

# -- reasons: NodePool ------------------------------------------------------------------------

REASON_SCALING = "Scaling"
REASON_MACHINES_FAILING = "MachinesFailing"

# -- reasons: Project -------------------------------------------------------------------------

REASON_CREATING = "Creating"
REASON_NO_CREATOR = "NoCreator"
REASON_OWNER_BOUND = "OwnerBound"
REASON_BINDING = "Binding"
REASON_WAITING_FOR_OWNER = "WaitingForOwner"
REASON_POPULATED = "Populated"
REASON_NETWORK_POLICY_DISABLED = "NetworkPolicyDisabled"
REASON_SYSTEM_PROJECT = "SystemProject"

# -- reasons: NodeDriver ----------------------------------------------------------------------

REASON_BUILTIN = "Builtin"
REASON_DOWNLOADED = "Downloaded"
REASON_CACHED = "Cached"
REASON_INVALID_URL = "InvalidURL"
REASON_HTTP_ERROR = "HTTPError"
REASON_TOO_LARGE = "TooLarge"
REASON_CHECKSUM_MISMATCH = "ChecksumMismatch"
REASON_CACHE_FAILED = "CacheFailed"
REASON_INACTIVE = "Inactive"
REASON_NOT_DOWNLOADED = "NotDownloaded"
REASON_SCHEMA_READ = "SchemaRead"
REASON_SCHEMA_FAILED = "SchemaFailed"
