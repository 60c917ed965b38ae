//! A real Kubernetes control plane for tests: etcd and kube-apiserver on free loopback ports, in a temporary
//! directory, with RBAC authorization on.
//!
//! The binaries are built by `tests/tools/build-tools.sh` (this module never builds them) into
//! `~/.cache/llmbench-tools/<tool>-<version>/bin/<tool>`; `LLMBENCH_TOOLS_DIR` may instead name a directory that
//! holds them directly, and `LLMBENCH_TOOLS_CACHE` moves the cache as it does for the script.
//!
//! There is no kube-controller-manager and no scheduler: no garbage collection, no default ServiceAccount, no PVC
//! binding, no pod scheduling. What a test needs from those it must do itself.
//!
//! Every server process runs under a small `sh` watchdog that holds a pipe from this process. When the
//! [`ControlPlane`] is dropped — or this process dies in any way, even by `SIGKILL` — the pipe closes and the watchdog
//! kills the server, so no etcd or kube-apiserver outlives the test that started it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read as _};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The tool versions pinned for the whole project (also read by `tests/tools/build-tools.sh`).
const VERSIONS_ENV: &str = include_str!("../tools/versions.env");

/// What to run when a tool is missing.
pub const BUILD_HINT: &str = "run `bash tests/tools/build-tools.sh` (or `make e2e-tools`) to build it from the Go module proxy";

/// How many lines of a server's log an error carries.
const LOG_TAIL_LINES: usize = 30;
const ETCD_READY_TIMEOUT: Duration = Duration::from_secs(60);
const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts at starting when a port picked as free was taken before the server bound it.
const START_ATTEMPTS: usize = 3;
/// Lifetime of tokens from [`ControlPlane::token_for_service_account`].
const TOKEN_SECONDS: i64 = 3600;

/// Everything that can go wrong while starting or using the control plane.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("tests/tools/versions.env has no {key}")]
    VersionMissing { key: &'static str },

    #[error("{tool} {version} not found at {}: {BUILD_HINT}, or set LLMBENCH_TOOLS_DIR to a directory that holds it", path.display())]
    ToolMissing {
        tool: &'static str,
        version: String,
        path: PathBuf,
    },

    #[error(
        "neither LLMBENCH_TOOLS_DIR, LLMBENCH_TOOLS_CACHE nor HOME is set, so the test tools cannot be found"
    )]
    NoToolsLocation,

    #[error("{what} at {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("finding a free loopback port: {0}")]
    FreePort(#[source] io::Error),

    #[error("generating the {what}: {source}")]
    Certificate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },

    #[error("starting {tool} ({}): {source}", path.display())]
    Spawn {
        tool: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("{tool} exited during startup ({status}); last lines of {}:\n{tail}", log.display())]
    Exited {
        tool: &'static str,
        status: String,
        log: PathBuf,
        tail: String,
    },

    #[error("{tool} was not ready after {waited:?} (last check: {last_error}); last lines of {}:\n{tail}", log.display())]
    NotReady {
        tool: &'static str,
        waited: Duration,
        last_error: String,
        log: PathBuf,
        tail: String,
    },

    #[error("loading the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },

    #[error("building a kube client for {who}: {source}")]
    Client {
        who: String,
        #[source]
        source: kube::Error,
    },

    #[error("requesting a token for ServiceAccount {namespace}/{name}: {source}")]
    TokenRequest {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("the TokenRequest for ServiceAccount {namespace}/{name} returned no token")]
    EmptyToken { namespace: String, name: String },
}

impl HarnessError {
    fn io(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self + use<> {
        let path = path.to_path_buf();
        move |source| Self::Io { what, path, source }
    }
}

/// The tools that `tests/tools/build-tools.sh` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tool {
    Etcd,
    KubeApiserver,
    Kubectl,
    Helm,
    Kubelet,
    KubeScheduler,
    KubeControllerManager,
    KubeProxy,
    Coredns,
    LlmDInferenceSim,
}

impl Tool {
    pub const ALL: [Tool; 10] = [
        Tool::Etcd,
        Tool::KubeApiserver,
        Tool::Kubectl,
        Tool::Helm,
        Tool::Kubelet,
        Tool::KubeScheduler,
        Tool::KubeControllerManager,
        Tool::KubeProxy,
        Tool::Coredns,
        Tool::LlmDInferenceSim,
    ];

    /// The binary's name, as the build script spells it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Etcd => "etcd",
            Tool::KubeApiserver => "kube-apiserver",
            Tool::Kubectl => "kubectl",
            Tool::Helm => "helm",
            Tool::Kubelet => "kubelet",
            Tool::KubeScheduler => "kube-scheduler",
            Tool::KubeControllerManager => "kube-controller-manager",
            Tool::KubeProxy => "kube-proxy",
            Tool::Coredns => "coredns",
            Tool::LlmDInferenceSim => "llm-d-inference-sim",
        }
    }

    fn version_key(self) -> &'static str {
        match self {
            Tool::Etcd => "ETCD_VERSION",
            Tool::KubeApiserver
            | Tool::Kubectl
            | Tool::Kubelet
            | Tool::KubeScheduler
            | Tool::KubeControllerManager
            | Tool::KubeProxy => "KUBERNETES_VERSION",
            Tool::Helm => "HELM_VERSION",
            Tool::LlmDInferenceSim => "INFERENCE_SIM_VERSION",
            Tool::Coredns => "COREDNS_VERSION",
        }
    }

    /// The pinned version from `tests/tools/versions.env`.
    pub fn version(self) -> Result<String, HarnessError> {
        let key = self.version_key();
        pinned_versions()
            .remove(key)
            .ok_or(HarnessError::VersionMissing { key })
    }
}

/// `KEY=VALUE` lines of `tests/tools/versions.env`, comments and blank lines skipped.
fn pinned_versions() -> BTreeMap<String, String> {
    VERSIONS_ENV
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().trim_matches('"').to_owned()))
        .collect()
}

/// Where the test tools are.
#[derive(Debug, Clone)]
pub enum Tools {
    /// `LLMBENCH_TOOLS_DIR`: the binaries directly in one directory.
    Flat(PathBuf),
    /// The build script's cache: `<root>/<tool>-<version>/bin/<tool>`.
    Cache(PathBuf),
}

impl Tools {
    /// `LLMBENCH_TOOLS_DIR` if set, else `LLMBENCH_TOOLS_CACHE`, else `~/.cache/llmbench-tools`.
    pub fn from_env() -> Result<Self, HarnessError> {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(dir) = var("LLMBENCH_TOOLS_DIR") {
            return Ok(Tools::Flat(dir.into()));
        }
        if let Some(cache) = var("LLMBENCH_TOOLS_CACHE") {
            return Ok(Tools::Cache(cache.into()));
        }
        let home = var("HOME").ok_or(HarnessError::NoToolsLocation)?;
        Ok(Tools::Cache(
            Path::new(&home).join(".cache").join("llmbench-tools"),
        ))
    }

    /// The path of `tool`, which must exist; a missing tool is an error that says how to build it.
    pub fn path(&self, tool: Tool) -> Result<PathBuf, HarnessError> {
        let version = tool.version()?;
        let path = match self {
            Tools::Flat(dir) => dir.join(tool.name()),
            Tools::Cache(root) => root
                .join(format!("{}-{version}", tool.name()))
                .join("bin")
                .join(tool.name()),
        };
        if path.is_file() {
            Ok(path)
        } else {
            Err(HarnessError::ToolMissing {
                tool: tool.name(),
                version,
                path,
            })
        }
    }
}

/// Whether the end-to-end tests are switched off (`LLMBENCH_E2E=0`); prints why when they are.
///
/// Nothing else skips them: a missing tool fails the test with [`BUILD_HINT`].
pub fn e2e_disabled(test: &str) -> bool {
    let off = std::env::var("LLMBENCH_E2E").is_ok_and(|v| v.trim() == "0");
    if off {
        println!("skipping {test}: LLMBENCH_E2E=0 switches the end-to-end tests off");
    }
    off
}

/// File names inside the control plane's directory.
struct Files {
    dir: PathBuf,
}

impl Files {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, contents: &str) -> Result<PathBuf, HarnessError> {
        let path = self.path(name);
        std::fs::write(&path, contents).map_err(HarnessError::io("writing", &path))?;
        Ok(path)
    }
}

/// The CA, the apiserver's serving certificate, the admin's client certificate and the service-account signing key.
struct Pki {
    ca_cert: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    admin_cert: PathBuf,
    admin_key: PathBuf,
    sa_public_key: PathBuf,
    sa_private_key: PathBuf,
}

fn generate_pki(files: &Files, address: Ipv4Addr) -> Result<Pki, HarnessError> {
    let cert_err = |what| move |source| HarnessError::Certificate { what, source };
    let name = |cn: &str, org: Option<&str>| {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        if let Some(org) = org {
            dn.push(DnType::OrganizationName, org);
        }
        dn
    };

    let ca_key = KeyPair::generate().map_err(cert_err("CA key"))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err("CA"))?;
    ca_params.distinguished_name = name("llmbench-e2e-ca", None);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(cert_err("CA"))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf = |what: &'static str,
                sans: Vec<String>,
                dn: DistinguishedName,
                usage: ExtendedKeyUsagePurpose|
     -> Result<(String, String), HarnessError> {
        let key = KeyPair::generate().map_err(cert_err(what))?;
        let mut params = CertificateParams::new(sans).map_err(cert_err(what))?;
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &issuer).map_err(cert_err(what))?;
        Ok((cert.pem(), key.serialize_pem()))
    };

    // The names a client may use for the apiserver: the address it listens on, and the in-cluster names.
    let listen = address.to_string();
    let serving_sans = [
        listen.as_str(),
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "10.0.0.1",
    ]
    .map(String::from)
    .to_vec();
    let (serving_cert, serving_key) = leaf(
        "apiserver serving certificate",
        serving_sans,
        name("kube-apiserver", None),
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    // The apiserver maps a client certificate's CN to the user and its O to groups: system:masters is cluster-admin.
    let (admin_cert, admin_key) = leaf(
        "admin client certificate",
        Vec::new(),
        name("llmbench-e2e-admin", Some("system:masters")),
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    let sa_key = KeyPair::generate().map_err(cert_err("service-account signing key"))?;

    Ok(Pki {
        ca_cert: files.write("ca.crt", &ca_cert.pem())?,
        serving_cert: files.write("apiserver.crt", &serving_cert)?,
        serving_key: files.write("apiserver.key", &serving_key)?,
        admin_cert: files.write("admin.crt", &admin_cert)?,
        admin_key: files.write("admin.key", &admin_key)?,
        sa_public_key: files.write("sa.pub", &sa_key.public_key_pem())?,
        sa_private_key: files.write("sa.key", &sa_key.serialize_pem())?,
    })
}

/// `n` distinct loopback ports that were free a moment ago (all held open together, so they differ).
fn free_ports<const N: usize>() -> Result<[u16; N], HarnessError> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind(("127.0.0.1", 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(HarnessError::FreePort)?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(HarnessError::FreePort)?
            .port();
    }
    Ok(ports)
}

/// The last `n` lines of a file (empty if it cannot be read).
fn tail(path: &Path, n: usize) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let mut bytes = Vec::new();
        if file.read_to_end(&mut bytes).is_ok() {
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The watchdog around each server. `$1` is a directory to remove once the server is dead (or empty), the rest is
/// the server's command line. fd 0 is a pipe from the test process: when it reaches EOF (the test process closed it
/// or died), the server is killed. The shell exits with the server's status when the server exits by itself.
const WATCHDOG: &str = r#"
cleanup=$1; shift
exec 3<&0 </dev/null
"$@" 3<&- &
server=$!
{
    read -r _ <&3 || :
    # From here on the main shell's `kill "$watcher"` (sent once the server is dead) must not stop the cleanup.
    trap '' TERM
    kill -KILL "$server" 2>/dev/null
    i=0
    while kill -0 "$server" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if [ -n "$cleanup" ]; then rm -rf -- "$cleanup"; fi
} &
watcher=$!
exec 3<&-
wait "$server"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

/// A server process under its watchdog.
pub(crate) struct Supervised {
    tool: &'static str,
    log: PathBuf,
    watchdog: Child,
    /// Closing this kills the server.
    lifeline: Option<ChildStdin>,
}

impl Supervised {
    pub(crate) fn spawn(
        tool: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
        cleanup_dir: Option<&Path>,
    ) -> Result<Self, HarnessError> {
        let out = File::create(&log).map_err(HarnessError::io("creating the log", &log))?;
        let err = out
            .try_clone()
            .map_err(HarnessError::io("opening the log", &log))?;
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("llmbench-e2e-watchdog")
            .arg(cleanup_dir.map(Path::as_os_str).unwrap_or_default())
            .arg(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| HarnessError::Spawn {
                tool,
                path: binary.to_path_buf(),
                source,
            })?;
        let lifeline = watchdog.stdin.take();
        Ok(Self {
            tool,
            log,
            watchdog,
            lifeline,
        })
    }

    /// `Some(status)` once the server has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.watchdog.try_wait().ok().flatten()
    }

    pub(crate) fn log_tail(&self) -> String {
        tail(&self.log, LOG_TAIL_LINES)
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.log
    }

    pub(crate) fn exited_error(&self, status: ExitStatus) -> HarnessError {
        HarnessError::Exited {
            tool: self.tool,
            status: status.to_string(),
            log: self.log.clone(),
            tail: self.log_tail(),
        }
    }

    pub(crate) fn not_ready_error(&self, waited: Duration, last_error: String) -> HarnessError {
        HarnessError::NotReady {
            tool: self.tool,
            waited,
            last_error,
            log: self.log.clone(),
            tail: self.log_tail(),
        }
    }

    /// Kill the server and wait for the watchdog (bounded; a stuck watchdog is killed itself).
    pub(crate) fn stop(&mut self) {
        drop(self.lifeline.take());
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A running etcd + kube-apiserver. Dropping it kills both and removes its directory.
pub struct ControlPlane {
    tools: Tools,
    // Field order is drop order: the apiserver goes before etcd, and the directory after both.
    apiserver: Supervised,
    etcd: Supervised,
    dir: Option<tempfile::TempDir>,
    dir_path: PathBuf,
    server_url: String,
    ca_cert: PathBuf,
    admin_kubeconfig: PathBuf,
    sa_private_key: PathBuf,
}

/// Where and how the apiserver serves.
#[derive(Debug, Clone, Copy)]
struct Serving {
    /// The address it binds and advertises.
    address: Ipv4Addr,
    /// Serve a cluster with nodes (tests/src/node.rs): advertise a real endpoint for the `kubernetes` Service, admit
    /// pods with their ServiceAccount, and authenticate to kubelets with the admin's certificate.
    with_nodes: bool,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server_url", &self.server_url)
            .field("dir", &self.dir_path)
            .finish_non_exhaustive()
    }
}

impl ControlPlane {
    /// Start etcd and kube-apiserver with the tools from [`Tools::from_env`], and wait until the apiserver is ready.
    ///
    /// Set `LLMBENCH_E2E_KEEP=1` to keep the directory (certificates, kubeconfig, logs) after the control plane
    /// stops; its path is in the `Debug` output and in [`ControlPlane::dir`].
    pub async fn start() -> Result<Self, HarnessError> {
        Self::start_with(Tools::from_env()?).await
    }

    /// Like [`ControlPlane::start`], with the given tools.
    pub async fn start_with(tools: Tools) -> Result<Self, HarnessError> {
        let serving = Serving {
            address: Ipv4Addr::LOCALHOST,
            with_nodes: false,
        };
        Self::start_serving(tools, serving).await
    }

    /// A control plane for a real node ([`crate::node::RealNode`]): the apiserver listens on `address` (the host's
    /// end of the node's network), which pods reach through the `kubernetes` Service.
    pub async fn start_for_node(tools: Tools, address: Ipv4Addr) -> Result<Self, HarnessError> {
        let serving = Serving {
            address,
            with_nodes: true,
        };
        Self::start_serving(tools, serving).await
    }

    async fn start_serving(tools: Tools, serving: Serving) -> Result<Self, HarnessError> {
        let mut attempt = 1;
        loop {
            match Self::start_once(tools.clone(), serving).await {
                Err(StartError { error, port_race }) if port_race && attempt < START_ATTEMPTS => {
                    tracing::warn!(attempt, %error, "a picked port was taken; starting again");
                    attempt += 1;
                }
                result => return result.map_err(|e| e.error),
            }
        }
    }

    async fn start_once(tools: Tools, serving: Serving) -> Result<Self, StartError> {
        let etcd_bin = tools.path(Tool::Etcd)?;
        let apiserver_bin = tools.path(Tool::KubeApiserver)?;

        let keep = std::env::var("LLMBENCH_E2E_KEEP").is_ok_and(|v| v == "1");
        let tmp = tempfile::Builder::new()
            .prefix("llmbench-e2e-")
            .tempdir()
            .map_err(HarnessError::io(
                "creating a temporary directory",
                &std::env::temp_dir(),
            ))?;
        let dir_path = tmp.path().to_path_buf();
        let dir = if keep {
            // The directory outlives us; nothing removes it.
            let _ = tmp.keep();
            None
        } else {
            Some(tmp)
        };
        let files = Files {
            dir: dir_path.clone(),
        };
        let pki = generate_pki(&files, serving.address)?;

        let [etcd_port, etcd_peer_port, apiserver_port] = free_ports::<3>()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
        let etcd_args = [
            "--name=llmbench-e2e".to_owned(),
            format!("--data-dir={}", files.path("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=llmbench-e2e={peer_url}"),
            "--unsafe-no-fsync=true".to_owned(),
            "--log-level=warn".to_owned(),
        ];
        // etcd's watchdog, the last to die, also removes the directory if this process dies without dropping us.
        let cleanup = dir.as_ref().map(|_| dir_path.as_path());
        let mut etcd = Supervised::spawn(
            "etcd",
            &etcd_bin,
            &etcd_args,
            files.path("etcd.log"),
            cleanup,
        )?;
        wait_for_etcd(&mut etcd, etcd_port).await?;

        let server_url = format!("https://{}:{apiserver_port}", serving.address);
        let p = |path: &Path| path.display().to_string();
        let mut apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={apiserver_port}"),
            format!("--bind-address={}", serving.address),
            // Without it the apiserver looks for a default route to advertise.
            format!("--advertise-address={}", serving.address),
            format!("--cert-dir={}", files.path("apiserver-certs").display()),
            format!("--tls-cert-file={}", p(&pki.serving_cert)),
            format!("--tls-private-key-file={}", p(&pki.serving_key)),
            format!("--client-ca-file={}", p(&pki.ca_cert)),
            format!("--service-account-issuer={server_url}/"),
            format!("--service-account-key-file={}", p(&pki.sa_public_key)),
            format!(
                "--service-account-signing-key-file={}",
                p(&pki.sa_private_key)
            ),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--allow-privileged=true".to_owned(),
            "--authorization-mode=RBAC".to_owned(),
            "--profiling=false".to_owned(),
        ];
        if serving.with_nodes {
            // `kubectl exec`, `logs` and `results fetch` go through the kubelet, which trusts our CA.
            apiserver_args.push(format!(
                "--kubelet-client-certificate={}",
                p(&pki.admin_cert)
            ));
            apiserver_args.push(format!("--kubelet-client-key={}", p(&pki.admin_key)));
            // The node's name resolves nowhere; its InternalIP is the kubelet's address.
            apiserver_args.push("--kubelet-preferred-address-types=InternalIP".to_owned());
        } else {
            // No controller-manager, so no `default` ServiceAccount for the plugin to find.
            apiserver_args.push("--disable-admission-plugins=ServiceAccount".to_owned());
            // A loopback address is not a valid endpoint of the `kubernetes` Service; don't try.
            apiserver_args.push("--endpoint-reconciler-type=none".to_owned());
        }
        let mut apiserver = Supervised::spawn(
            "kube-apiserver",
            &apiserver_bin,
            &apiserver_args,
            files.path("kube-apiserver.log"),
            None,
        )?;

        let admin_kubeconfig = files.write(
            "admin.kubeconfig",
            &kubeconfig_yaml(
                &server_url,
                &pki.ca_cert,
                "llmbench-e2e-admin",
                &format!(
                    "    client-certificate: {}\n    client-key: {}\n",
                    yaml_str(&p(&pki.admin_cert)),
                    yaml_str(&p(&pki.admin_key))
                ),
            ),
        )?;
        let admin = client_from_kubeconfig(&admin_kubeconfig, "the admin").await?;
        wait_for_apiserver(&mut apiserver, &admin).await?;

        Ok(Self {
            tools,
            apiserver,
            etcd,
            dir,
            dir_path,
            server_url,
            ca_cert: pki.ca_cert,
            admin_kubeconfig,
            sa_private_key: pki.sa_private_key,
        })
    }

    /// A client authenticated as `llmbench-e2e-admin` in `system:masters` (cluster-admin).
    ///
    /// Each call builds a new client, so a control plane shared between tests (each with its own tokio runtime)
    /// hands every test a client bound to that test's runtime.
    pub async fn admin_client(&self) -> Result<Client, HarnessError> {
        client_from_kubeconfig(&self.admin_kubeconfig, "the admin").await
    }

    /// The admin kubeconfig, for `kubectl --kubeconfig` and `helm --kubeconfig`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The CA that signed the apiserver's serving certificate (and the admin's client certificate).
    pub fn ca_cert_path(&self) -> &Path {
        &self.ca_cert
    }

    /// The control plane's directory: certificates, kubeconfigs, `etcd.log`, `kube-apiserver.log`.
    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    /// The key that signs ServiceAccount tokens (the controller-manager's token controller needs it).
    pub(crate) fn service_account_key(&self) -> &Path {
        &self.sa_private_key
    }

    /// Where the test tools are.
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// A `kubectl` command already pointed at this control plane as admin.
    pub fn kubectl(&self) -> Result<Command, HarnessError> {
        let mut cmd = Command::new(self.tools.path(Tool::Kubectl)?);
        cmd.arg("--kubeconfig").arg(&self.admin_kubeconfig);
        Ok(cmd)
    }

    /// A token for ServiceAccount `namespace/name` (which must exist) from the TokenRequest API, valid for an hour;
    /// an operator under test can run with it under its own RBAC instead of as admin.
    pub async fn token_for_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, HarnessError> {
        let admin = self.admin_client().await?;
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: Vec::new(),
                expiration_seconds: Some(TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let response = Api::<ServiceAccount>::namespaced(admin, namespace)
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|source| HarnessError::TokenRequest {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })?;
        match response.status {
            Some(status) if !status.token.is_empty() => Ok(status.token),
            _ => Err(HarnessError::EmptyToken {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            }),
        }
    }

    /// A client that authenticates with a bearer token (e.g. from [`ControlPlane::token_for_service_account`]).
    pub async fn client_for_token(&self, token: &str) -> Result<Client, HarnessError> {
        let path = self.kubeconfig_for_token("token-client", token)?;
        let client = client_from_kubeconfig(&path, "a token").await;
        let _ = std::fs::remove_file(&path);
        client
    }

    /// Write a kubeconfig named `<name>.kubeconfig` in the control plane's directory that authenticates with
    /// `token`, for a process under test (e.g. the operator with its ServiceAccount's token).
    pub fn kubeconfig_for_token(&self, name: &str, token: &str) -> Result<PathBuf, HarnessError> {
        let files = Files {
            dir: self.dir_path.clone(),
        };
        files.write(
            &format!("{name}.kubeconfig"),
            &kubeconfig_yaml(
                &self.server_url,
                &self.ca_cert,
                name,
                &format!("    token: {}\n", yaml_str(token)),
            ),
        )
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // The apiserver first, so it does not spend its last moments retrying a dead etcd.
        self.apiserver.stop();
        self.etcd.stop();
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
    }
}

/// A failed start, and whether starting again with new ports may help.
struct StartError {
    error: HarnessError,
    port_race: bool,
}

impl From<HarnessError> for StartError {
    fn from(error: HarnessError) -> Self {
        let port_race = match &error {
            HarnessError::Exited { tail, .. } | HarnessError::NotReady { tail, .. } => {
                tail.contains("address already in use")
            }
            _ => false,
        };
        Self { error, port_race }
    }
}

/// A double-quoted YAML scalar.
fn yaml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A one-cluster, one-user kubeconfig; `user` is the user's indented fields.
fn kubeconfig_yaml(server: &str, ca: &Path, name: &str, user: &str) -> String {
    let (server, ca, name) = (
        yaml_str(server),
        yaml_str(&ca.display().to_string()),
        yaml_str(name),
    );
    format!(
        "apiVersion: v1\nkind: Config\n\
         clusters:\n- name: llmbench-e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
         users:\n- name: {name}\n  user:\n{user}\
         contexts:\n- name: {name}\n  context:\n    cluster: llmbench-e2e\n    user: {name}\n    namespace: default\n\
         current-context: {name}\n"
    )
}

async fn client_from_kubeconfig(path: &Path, who: &str) -> Result<Client, HarnessError> {
    let kubeconfig_err = |source| HarnessError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_err)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(kubeconfig_err)?;
    Client::try_from(config).map_err(|source| HarnessError::Client {
        who: who.to_owned(),
        source,
    })
}

/// Poll etcd's `/health` over plain HTTP until it reports healthy.
async fn wait_for_etcd(etcd: &mut Supervised, port: u16) -> Result<(), HarnessError> {
    let start = Instant::now();
    let mut last_error = String::from("not checked yet");
    while start.elapsed() < ETCD_READY_TIMEOUT {
        if let Some(status) = etcd.exited() {
            return Err(etcd.exited_error(status));
        }
        match etcd_health(port).await {
            Ok(()) => return Ok(()),
            Err(e) => last_error = e,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(etcd.not_ready_error(start.elapsed(), last_error))
}

async fn etcd_health(port: u16) -> Result<(), String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(Duration::from_secs(2), exchange)
        .await
        .map_err(|_| "GET /health timed out".to_owned())?
        .map_err(|e| format!("GET /health: {e}"))?;
    let status_ok = response.lines().next().is_some_and(|l| l.contains(" 200 "));
    if status_ok && response.contains("\"health\":\"true\"") {
        Ok(())
    } else {
        Err(format!(
            "GET /health answered {}",
            response.lines().last().unwrap_or_default()
        ))
    }
}

/// Poll `/readyz` as admin until the apiserver is ready and has made the `default` namespace.
async fn wait_for_apiserver(
    apiserver: &mut Supervised,
    admin: &Client,
) -> Result<(), HarnessError> {
    let start = Instant::now();
    let mut last_error = String::from("not checked yet");
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    while start.elapsed() < APISERVER_READY_TIMEOUT {
        if let Some(status) = apiserver.exited() {
            return Err(apiserver.exited_error(status));
        }
        let readyz = http::Request::get("/readyz").body(Vec::new());
        let check: Result<(), String> = match readyz {
            Ok(request) => match admin.request_text(request).await {
                Ok(_) => match namespaces.get_opt("default").await {
                    Ok(Some(_)) => return Ok(()),
                    Ok(None) => Err("namespace default does not exist yet".to_owned()),
                    Err(e) => Err(format!("GET namespace default: {e}")),
                },
                Err(e) => Err(format!("GET /readyz: {e}")),
            },
            Err(e) => Err(format!("building GET /readyz: {e}")),
        };
        if let Err(e) = check {
            last_error = e;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(apiserver.not_ready_error(start.elapsed(), last_error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_pinned_version() {
        for tool in Tool::ALL {
            let version = tool.version().expect("pinned");
            assert!(version.starts_with('v'), "{}: {version}", tool.name());
        }
    }

    #[test]
    fn a_missing_tool_says_how_to_build_it() {
        let tools = Tools::Cache(PathBuf::from("/nonexistent/llmbench-tools"));
        let err = tools.path(Tool::KubeApiserver).expect_err("missing");
        let message = err.to_string();
        assert!(message.contains("tests/tools/build-tools.sh"), "{message}");
        assert!(
            message.contains("/nonexistent/llmbench-tools/kube-apiserver-v"),
            "{message}"
        );
    }

    #[test]
    fn free_ports_are_distinct() {
        let [a, b, c] = free_ports::<3>().expect("ports");
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn yaml_strings_are_quoted_and_escaped() {
        assert_eq!(yaml_str(r#"a"b\c"#), r#""a\"b\\c""#);
        let parsed: String = serde_saphyr::from_str(&yaml_str("x: y\n\"z\"")).expect("parses");
        assert_eq!(parsed, "x: y\n\"z\"");
    }

    #[test]
    fn the_log_tail_is_the_last_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).expect("write");
        let t = tail(&path, LOG_TAIL_LINES);
        assert!(t.starts_with("line 11\n") && t.ends_with("line 40"), "{t}");
    }
}
