#!/usr/bin/env python3
"""Keeps deploy/ from rotting (run by ctest): the Kubernetes manifests parse, the coordinator accepts
every flag, environment variable and config file they give it (--check-config), the ports agree
everywhere (container, --listen, Service, probes, scrape annotations, ServiceMonitor, Dockerfile),
the probe and scrape paths answer on a running coordinator started with the manifests' settings,
the grace period outlasts the drain, and the example consumer's flags are rsc-consume's.
  python3 scripts/check-manifests.py BUILD_DIR"""
import os, re, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request
import yaml

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build"))
k8s_root = os.path.join(root, "deploy", "k8s")
k8s = os.path.join(k8s_root, "base")
failures = []

def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)

docs = {}
for name in sorted(os.listdir(k8s)):
    if name.endswith(".yaml") and name != "kustomization.yaml":
        with open(os.path.join(k8s, name)) as f:
            for d in yaml.safe_load_all(f):
                docs[(d["kind"], d["metadata"]["name"])] = d
check(len(docs) >= 7, f"{len(docs)} Kubernetes objects parse")
with open(os.path.join(k8s, "kustomization.yaml")) as f:
    kust = yaml.safe_load(f)
listed = set(kust["resources"])
present = {n for n in os.listdir(k8s) if n.endswith(".yaml") and n != "kustomization.yaml"}
check(listed == present, "kustomization.yaml lists every manifest")

# No namespace written anywhere but in the overlays (deploy/k8s/overlays/*): the base and the TLS
# component name none, and what must name it (the certificate) gets it from the overlay.
overlay_ns = {}
for o in sorted(os.listdir(os.path.join(k8s_root, "overlays"))):
    with open(os.path.join(k8s_root, "overlays", o, "kustomization.yaml")) as f:
        overlay_ns[o] = yaml.safe_load(f).get("namespace")
check(set(overlay_ns) == {"plain", "tls"} and all(overlay_ns.values()), f"the overlays set a namespace ({overlay_ns})")
namespace = overlay_ns.get("tls") or "rsc"
hardcoded = []
for dirpath, _, names in os.walk(k8s_root):
    if os.path.join(k8s_root, "overlays") in dirpath:
        continue
    for n in names:
        if n.endswith(".yaml"):
            with open(os.path.join(dirpath, n)) as f:
                text = f.read()
            for d in yaml.safe_load_all(text):
                if d and "namespace" in d.get("metadata", {}):
                    hardcoded.append(f"{n}: metadata.namespace")
            for m in re.finditer(r"[\w*-]+\.(\w[\w-]*)\.svc\b", text):
                if m.group(1) not in ("NAMESPACE", "monitoring"):  # KEDA asks Prometheus in its own namespace
                    hardcoded.append(f"{n}: {m.group(0)}")
check(not hardcoded, f"no namespace written in the base, the TLS component or KEDA's example ({hardcoded})")
kubectl = shutil.which("kubectl")
def kustomize(path):  # the objects kubectl's kustomize renders, or None without kubectl
    if not kubectl:
        return None
    r = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True)
    check(r.returncode == 0, f"kubectl kustomize {os.path.relpath(path, root)} renders: {r.stderr.strip()[:200]}")
    return [d for d in yaml.safe_load_all(r.stdout) if d]
for o in ("plain", "tls"):
    rendered = kustomize(os.path.join(k8s_root, "overlays", o))
    if rendered is None:
        print(f"note kubectl is not installed: overlays/{o} is checked from its files only")
        continue
    check(all(d["metadata"].get("namespace") == overlay_ns[o] for d in rendered),
          f"overlays/{o}: every object is in its namespace {overlay_ns[o]} ({len(rendered)} objects)")

dep = docs[("Deployment", "rsc-coordinator")]
pod = dep["spec"]["template"]
c = pod["spec"]["containers"][0]
cm = docs[("ConfigMap", "rsc-coordinator")]["data"]
secret = docs[("Secret", "rsc-coordinator-auth")]["stringData"]
redis_password = docs[("Secret", "rsc-redis")]["stringData"]["password"]
check(dep["spec"]["replicas"] == 3, "3 replicas")
check(any(e["name"] == "POD_NAME" and e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name" for e in c["env"])
      and any(e["name"] == "POD_NAMESPACE" and e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
              for e in c["env"]),
      "POD_NAME and POD_NAMESPACE from the downward API")
check("resources" in c and "requests" in c["resources"], "resources set")
check(docs.get(("PodDisruptionBudget", "rsc-coordinator")) is not None, "a PodDisruptionBudget")

# Ports everywhere.
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
args = c["args"]
listen = args[args.index("--listen") + 1]
port = ports["http"]
check(listen.endswith(":" + str(port)), f"--listen {listen} is the container port {port}")
ann = pod["metadata"]["annotations"]
check(ann["prometheus.io/port"] == str(port) and ann["prometheus.io/scrape"] == "true", "scrape annotations on the port")
svc = docs[("Service", "rsc-coordinator")]
check(all(p["targetPort"] in ("http", port) for p in svc["spec"]["ports"]), "Service targets the container port")
check(c["readinessProbe"]["httpGet"]["port"] in ("http", port) and c["livenessProbe"]["httpGet"]["port"] in ("http", port),
      "probes on the container port")
sm = docs[("ServiceMonitor", "rsc-coordinator")]
check(sm["spec"]["endpoints"][0]["port"] in [p["name"] for p in svc["spec"]["ports"]], "ServiceMonitor uses the Service's port")
# The Prometheus Operator names the job after the Service's label jobLabel names; the alert rules
# (deploy/prometheus/rsc-alerts.yml, e.g. up{job="rsc"}) expect "rsc". Its selector must match one
# Service only: every Service over the pods it matches would scrape each pod once more.
with open(os.path.join(root, "deploy", "prometheus", "rsc-alerts.yml")) as f:
    rules_text = f.read()
job = svc["metadata"]["labels"].get(sm["spec"].get("jobLabel", ""), "")
check(job != "" and f'job="{job}"' in rules_text,
      f"the ServiceMonitor's job is '{job}', the job the alert rules name")
# The alert test that fires with the labels the ServiceMonitor gives uses the manifests' own names:
# the job, the Service, its port's name and the container's name.
with open(os.path.join(root, "deploy", "prometheus", "rsc-alerts.test.yml")) as f:
    tests_text = f.read()
operator_labels = (f'up{{job="{job}",namespace="prod",service="{svc["metadata"]["name"]}",'
                   f'endpoint="{sm["spec"]["endpoints"][0]["port"]}",pod="rsc-coordinator-5d8f7c9b4-x2k8q",'
                   f'container="{c["name"]}",')
check(operator_labels in tests_text,
      f"an alert test fires with the labels the ServiceMonitor gives ({operator_labels}...)")
matched = [n for (k, n), d in docs.items() if k == "Service"
           and all(d["metadata"].get("labels", {}).get(a) == b for a, b in sm["spec"]["selector"]["matchLabels"].items())]
check(matched == ["rsc-coordinator"], f"the ServiceMonitor selects the rsc-coordinator Service alone ({matched})")

# Pod Security "restricted" for every pod template: non-root, the runtime's seccomp profile, no
# privilege escalation, every capability dropped (what the admission controller checks).
def restricted(template, what):
    ps = template["spec"].get("securityContext", {})
    for ctr in template["spec"]["containers"]:
        cs = ctr.get("securityContext", {})
        ok = ((ps.get("runAsNonRoot") or cs.get("runAsNonRoot")) and
              (ps.get("seccompProfile", cs.get("seccompProfile", {})) or {}).get("type") in ("RuntimeDefault", "Localhost") and
              cs.get("allowPrivilegeEscalation") is False and "ALL" in cs.get("capabilities", {}).get("drop", []) and
              not cs.get("privileged") and not set(cs.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"})
        check(bool(ok), f"{what}/{ctr['name']} passes Pod Security 'restricted'")
for (kind, name), d in sorted(docs.items()):
    if kind in ("Deployment", "StatefulSet", "DaemonSet"):
        restricted(d["spec"]["template"], f"{kind} {name}")
spread = pod["spec"].get("topologySpreadConstraints", [])
check(any(t["topologyKey"] == "kubernetes.io/hostname" and t["maxSkew"] == 1 and t["whenUnsatisfiable"] == "DoNotSchedule"
          for t in spread), "the coordinator's replicas are spread one per node (topologySpreadConstraints)")
for (kind, name), d in docs.items():
    if kind == "StatefulSet":
        check(("Service", d["spec"]["serviceName"]) in docs, f"StatefulSet {name}'s serviceName is a Service defined here")
with open(os.path.join(root, "deploy", "docker", "Dockerfile")) as f:
    dockerfile = f.read()
check(re.search(r"^EXPOSE %d$" % port, dockerfile, re.M) is not None, "Dockerfile EXPOSEs the port")
with open(os.path.join(root, "deploy", "docker", "healthcheck.sh")) as f:
    healthcheck_text = f.read()
healthcheck = os.path.join(root, "deploy", "docker", "healthcheck.sh")
check(f"0.0.0.0:{port}" in dockerfile and 'CMD ["/usr/local/bin/rsc-healthcheck"]' in dockerfile
      and "deploy/docker/healthcheck.sh /out/bin/rsc-healthcheck" in dockerfile
      and "${RSC_HEALTHCHECK_PORT:-%d}" % port in healthcheck_text, "Dockerfile listens and health-checks on it")
# The image: the lean build (the server and the tools only), stripped, rsc-admin among them, and the
# runtime packages read from the binaries: here, from this build's, none a development package.
check("install-deps.sh --run" in dockerfile and "RSC_LEAN=1" in dockerfile and "install -D -s" in dockerfile
      and re.search(r"for b in [^;]*\brsc-admin\b", dockerfile) is not None, "the image builds lean, stripped, with rsc-admin")
rp = subprocess.run(["sh", os.path.join(root, "deploy", "docker", "runtime-packages.sh")] +
                    [os.path.join(build, b) for b in ("rsc-coordinator", "rsc-consume", "rsc-produce", "rsc-admin")],
                    capture_output=True, text=True)
runtime_pkgs = rp.stdout.split()
check(rp.returncode == 0 and "libcaf-core0.17" in runtime_pkgs and "libhiredis0.14" in runtime_pkgs
      and not any(p.endswith("-dev") for p in runtime_pkgs) and "libtcmalloc-minimal4" not in runtime_pkgs,
      f"the runtime image installs the libraries the binaries load, no development package ({' '.join(runtime_pkgs)})")
check(re.search(r"^USER \S+$", dockerfile, re.M) is not None and "USER root" not in dockerfile, "Dockerfile runs as a non-root user")
grace = int(cm.get("RSC_SHUTDOWN_GRACE_MS", "10000")) / 1000
check(pod["spec"]["terminationGracePeriodSeconds"] > grace, f"grace period outlasts the {grace:.0f} s drain")

# The coordinator accepts the flags, environment and config file as given.
tmp = tempfile.mkdtemp(prefix="rsc-manifests-")
# Every Secret mounted as files, each into a directory of its own under `where` (paths rewritten to
# them): the container's args and environment (with Kubernetes' $(VAR) expansion) as they would be.
volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
def materialize(where):
    mounts = {}
    for m in c["volumeMounts"]:
        sec = docs[("Secret", volumes[m["name"]]["secret"]["secretName"])]["stringData"]
        local = os.path.join(where, m["name"])
        os.makedirs(local)
        for fname, text in sec.items():
            with open(os.path.join(local, fname), "w") as f:
                f.write(text)
        mounts[m["mountPath"]] = local
    def localize(v):
        for path in sorted(mounts, key=len, reverse=True):  # /etc/rsc-redis before /etc/rsc
            if v == path or v.startswith(path + "/"):
                return mounts[path] + v[len(path):]
        return v
    e_ = {k: v for k, v in os.environ.items() if not k.startswith("RSC_")}
    e_.update(cm)
    e_["POD_IP"] = "10.1.2.3"
    e_["POD_NAME"] = "rsc-coordinator-7d9f-x2k4p"
    e_["POD_NAMESPACE"] = namespace
    for e in c["env"]:
        if "value" in e:
            e_[e["name"]] = localize(re.sub(r"\$\((\w+)\)", lambda m: e_.get(m.group(1), ""), e["value"]))
    return [localize(a) for a in args], e_
local_args, env = materialize(tmp)
check("RSC_REDIS_PASSWORD" not in cm and all(e["name"] != "RSC_REDIS_PASSWORD" for e in c["env"])
      and "RSC_REDIS_PASSWORD_FILE" in env, "the Redis password comes from a mounted Secret, never from the environment")
adv = env.get("RSC_ADVERTISE", "")
check(adv == f"rsc-coordinator-7d9f-x2k4p.rsc-pods.{namespace}.svc:{port}",
      f"RSC_ADVERTISE is the pod's name in the headless Service and the container port ({adv})")
pods_svc = docs.get(("Service", "rsc-pods"), {}).get("spec", {})
check(pods_svc.get("clusterIP") == "None" and pod["spec"].get("subdomain") == "rsc-pods"
      and pods_svc.get("selector") == dep["spec"]["selector"]["matchLabels"],
      "a headless Service rsc-pods selects the pods, whose subdomain it is (their names resolve)")
coord = os.path.join(build, "rsc-coordinator")
r = subprocess.run([coord, "--check-config"] + local_args, env=env, capture_output=True, text=True)
check(r.returncode == 0, "rsc-coordinator --check-config accepts the manifest: " + (r.stdout.strip() or r.stderr.strip())[:200])
bad = subprocess.run([coord, "--check-config", "--no-such-flag"], env=env, capture_output=True, text=True)
check(bad.returncode == 2, "--check-config refuses what is wrong")

# The probe and scrape paths answer on a coordinator run with these settings.
def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p
def stop_all(procs):  # the processes this script started, newest first: SIGTERM, then SIGKILL after 10 s
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
rport, cport = free_port(), free_port()
procs = []
try:
    # The Secret's password is required: the coordinator reaches /readyz only by reading it from its file.
    procs.append(subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--dir", tmp,
                                   "--appendonly", "no", "--requirepass", redis_password],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    run_args = list(local_args)
    run_args[run_args.index("--listen") + 1] = f"127.0.0.1:{cport}"
    env["RSC_REDIS"] = f"127.0.0.1:{rport}"
    env["RSC_ADVERTISE"] = f"127.0.0.1:{cport}"  # loopback only here
    procs.append(subprocess.Popen([coord] + run_args, env=env, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(tmp, "pod.log"), "w")))
    def get(path):
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{cport}{path}", timeout=2).status
        except Exception as e:
            return getattr(e, "code", 0)
    deadline = time.time() + 10
    while time.time() < deadline and get(c["readinessProbe"]["httpGet"]["path"]) != 200:
        time.sleep(0.1)
    try:
        metrics_body = urllib.request.urlopen(f"http://127.0.0.1:{cport}{ann['prometheus.io/path']}", timeout=2).read().decode()
    except Exception:
        metrics_body = ""
    for what, path in [("readiness", c["readinessProbe"]["httpGet"]["path"]), ("liveness", c["livenessProbe"]["httpGet"]["path"]),
                       ("scrape", ann["prometheus.io/path"]), ("ServiceMonitor", sm["spec"]["endpoints"][0]["path"])]:
        check(get(path) == 200, f"{what} path {path} answers 200")
    def healthy(extra_env, port_):  # the image's HEALTHCHECK, run against this pod
        e = {k: v for k, v in os.environ.items() if not k.startswith("RSC_")}
        e.update(extra_env)
        e["RSC_HEALTHCHECK_PORT"] = str(port_)
        return subprocess.run(["sh", healthcheck], env=e, capture_output=True).returncode
    check(healthy({}, cport) == 0 and healthy({}, free_port()) != 0,
          "the image's health check passes on a plain pod (and fails where nothing answers)")
finally:
    stop_all(procs)
    print(open(os.path.join(tmp, "pod.log")).read()[-600:]) if failures else None
    shutil.rmtree(tmp, ignore_errors=True)

# The example consumer's flags are rsc-consume's.
cons = docs[("Deployment", "orders-billing-consumer")]["spec"]["template"]["spec"]["containers"][0]
usage = subprocess.run([os.path.join(build, "rsc-consume"), "--help"], capture_output=True, text=True)
flags = [a for a in cons["args"] if a.startswith("--")]
check(all(f in usage.stdout + usage.stderr for f in flags), f"rsc-consume knows {', '.join(flags)}")
cenv = {e["name"]: e.get("value") for e in cons.get("env", [])}
check("RSC_REDIS_PASSWORD_FILE" in cenv and "RSC_REDIS_PASSWORD_FILE" in usage.stdout + usage.stderr
      and any(cenv["RSC_REDIS_PASSWORD_FILE"].startswith(m["mountPath"]) for m in cons.get("volumeMounts", [])),
      "the consumer reads the Redis password from the mounted Secret")
check(cons["command"][0] == "/usr/local/bin/rsc-consume" and re.search(r"for b in [^;]*\brsc-consume\b", dockerfile)
      and "COPY --from=build /out/bin/ /usr/local/bin/" in dockerfile, "the image carries rsc-consume where the consumer runs it")

# The static-member example: a StatefulSet whose pod name is each member's instance id, with flags
# and environment rsc-consume knows.
sts = docs[("StatefulSet", "orders-audit-consumer")]["spec"]["template"]["spec"]["containers"][0]
sflags = [a for a in sts["args"] if a.startswith("--")]
senv = {e["name"]: e for e in sts.get("env", [])}
check(all(f in usage.stdout + usage.stderr for f in sflags), f"the StatefulSet consumer's flags are rsc-consume's ({', '.join(sflags)})")
check("RSC_INSTANCE_ID" in senv and senv["RSC_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
      and "RSC_INSTANCE_ID" in usage.stdout + usage.stderr, "its instance id is the pod's name (RSC_INSTANCE_ID)")

# The KEDA example scales that consumer, from zero, on a lag series the coordinator exports.
with open(os.path.join(k8s_root, "keda", "scaledobject.yaml")) as f:
    so = yaml.safe_load(f)
spec = so["spec"]
check(so["kind"] == "ScaledObject" and so["apiVersion"].startswith("keda.sh/"), "the KEDA example is a ScaledObject")
check(spec["scaleTargetRef"]["name"] == "orders-billing-consumer", "it scales the example consumer")
check("replicas" not in docs[("Deployment", "orders-billing-consumer")]["spec"],
      "the Deployment KEDA scales sets no replicas (they would fight at every apply)")
check(any("rsc_stream_group_pending" in t["metadata"]["query"] for t in spec["triggers"]),
      "it wakes on records delivered and not acked too (rsc_stream_group_pending)")
check(spec.get("fallback", {}).get("replicas", 0) > 0, "it has a fallback for when Prometheus cannot be asked")
check(spec["minReplicaCount"] == 0 and "activationThreshold" in spec["triggers"][0]["metadata"],
      "it scales from zero, with an activation threshold")
shards = int(cm.get("RSC_DEFAULT_SHARD_COUNT", "16"))
check(0 < spec["maxReplicaCount"] <= shards, f"no more replicas than shards ({spec['maxReplicaCount']} <= {shards})")
cargs = cons["args"]
stream, group = cargs[cargs.index("--stream") + 1], cargs[cargs.index("--group") + 1]
for trig in spec["triggers"]:
    query = trig["metadata"]["query"]
    check(trig["type"] == "prometheus" and f'stream="{stream}"' in query and f'group="{group}"' in query,
          f"its query names the consumer's stream and group ({query})")
    names = set(re.findall(r"\b(rsc_[a-z_]+)", query))
    check(names and all(f"# TYPE {n} gauge" in metrics_body for n in names),
          f"the coordinator exports {', '.join(sorted(names))} as a gauge")

# The TLS component (deploy/k8s/tls, added to the base by deploy/k8s/overlays/tls): its patches name
# objects of the base, the coordinator accepts its settings (with certificates made here), a pod
# started with them answers its probes over HTTPS, and the consumer's flags are rsc-consume's.
tlsdir = os.path.join(k8s_root, "tls")
with open(os.path.join(tlsdir, "kustomization.yaml")) as f:
    tk = yaml.safe_load(f)
with open(os.path.join(k8s_root, "overlays", "tls", "kustomization.yaml")) as f:
    tls_overlay = yaml.safe_load(f)
files = [p["path"] for p in tk["patches"]] + tk["resources"]
check(tk["kind"] == "Component" and all(os.path.exists(os.path.join(tlsdir, x)) for x in files)
      and tls_overlay["resources"] == ["../../base"] and tls_overlay["components"] == ["../../tls"],
      "the TLS component's files exist and overlays/tls adds it to the base")
patches = {}
for p in tk["patches"]:
    with open(os.path.join(tlsdir, p["path"])) as f:
        d = yaml.safe_load(f)
    patches[(d["kind"], d["metadata"]["name"])] = d
check(all(k in docs for k in patches), "every TLS patch names an object of the base")
with open(os.path.join(tlsdir, "certificate.yaml")) as f:
    cert_names = yaml.safe_load(f)["spec"]["dnsNames"]
# The overlay's replacements write its namespace into the names, as kustomize does (a field split at
# the delimiter, one part replaced); kubectl's own rendering must agree.
for rp in tls_overlay.get("replacements", []):
    for t in rp["targets"]:
        for fp in t["fieldPaths"]:
            i = int(fp.rsplit(".", 1)[1])
            parts = cert_names[i].split(t["options"]["delimiter"])
            parts[t["options"]["index"]] = namespace
            cert_names[i] = t["options"]["delimiter"].join(parts)
rendered_tls = kustomize(os.path.join(k8s_root, "overlays", "tls"))
if rendered_tls is not None:
    kc = [d for d in rendered_tls if d["kind"] == "Certificate" and d["metadata"]["name"] == "rsc-coordinator"]
    check(kc and kc[0]["spec"]["dnsNames"] == cert_names, f"kubectl renders the certificate's names so ({cert_names})")
advertised_host = adv.rsplit(":", 1)[0]
check(any(n.startswith("*.") and advertised_host.endswith(n[1:]) and "." not in advertised_host[: -len(n[1:])]
          for n in cert_names) and f"rsc-coordinator.{namespace}.svc" in cert_names and "rsc-coordinator" in cert_names
      and not any("NAMESPACE" in n for n in cert_names),
      f"the certificate covers the Service and the name each pod advertises ({advertised_host})")
tls_consumers = [yaml.safe_load(open(os.path.join(tlsdir, p["path"]))) for p in tk["patches"]
                 if p["path"].startswith("consumer")]
check(all(f"https://{n}:" in " ".join(x["spec"]["template"]["spec"]["containers"][0]["args"])
          for x in tls_consumers for n in ["rsc-coordinator"]) and "rsc-coordinator" in cert_names,
      "the TLS consumers call the Service by a name the certificate covers")
tpod = patches[("Deployment", "rsc-coordinator")]["spec"]["template"]
tc = tpod["spec"]["containers"][0]
tenv_decl = {e["name"]: e["value"] for e in tc["env"]}
probe_port = {p["name"]: p["containerPort"] for p in tc.get("ports", [])}.get("probe")
check("RSC_TLS_CLIENT_CA_FILE" in tenv_decl, "the TLS overlay turns mutual TLS on (RSC_TLS_CLIENT_CA_FILE)")
check(probe_port is not None and tenv_decl.get("RSC_PROBE_LISTEN", "").endswith(f":{probe_port}")
      and all(tc[p]["httpGet"].get("port") == "probe" and tc[p]["httpGet"].get("scheme", "HTTP") == "HTTP"
              for p in ("readinessProbe", "livenessProbe")),
      f"the probes go to the plain probe port the pod serves (RSC_PROBE_LISTEN, port {probe_port})")
check(tpod["metadata"]["annotations"].get("prometheus.io/scheme") == "https", "the scrape annotation says HTTPS")
sm_tls = patches[("ServiceMonitor", "rsc-coordinator")]["spec"]["endpoints"][0]
check(sm_tls["scheme"] == "https" and "cert" in sm_tls["tlsConfig"] and "keySecret" in sm_tls["tlsConfig"],
      "the ServiceMonitor scrapes HTTPS presenting a client certificate")
with open(os.path.join(tlsdir, "client-certificate.yaml")) as f:
    client_cert = yaml.safe_load(f)
check("client auth" in client_cert["spec"]["usages"], "the client certificate is issued for client auth")
tmp2 = tempfile.mkdtemp(prefix="rsc-manifests-tls-")
def sh(cmd):
    subprocess.run(cmd, shell=True, check=True, cwd=tmp2, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    sh("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=ca -keyout ca.key -out ca.crt")
    sh("openssl req -newkey rsa:2048 -nodes -subj /CN=rsc -keyout tls.key -out tls.csr")
    with open(os.path.join(tmp2, "ext"), "w") as f:
        f.write("subjectAltName=DNS:rsc-coordinator,IP:127.0.0.1\n")
    sh("openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile ext -out tls.crt")
    sh("openssl req -newkey rsa:2048 -nodes -subj /CN=rsc-client -keyout client.key -out client.csr")
    with open(os.path.join(tmp2, "client-ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    sh("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile client-ext -out client.crt")
    # The base's Secrets again (the first directory is gone), then the overlay's files.
    local_args, tenv = materialize(tmp2)
    for e in tc["env"]:
        tenv[e["name"]] = os.path.join(tmp2, os.path.basename(e["value"])) if e["value"].startswith("/etc/") else e["value"]
    r = subprocess.run([coord, "--check-config"] + local_args, env=tenv, capture_output=True, text=True)
    check(r.returncode == 0 and "https=on" in r.stdout and "redis-tls=on" in r.stdout,
          "rsc-coordinator --check-config accepts the TLS overlay: " + (r.stdout.strip() or r.stderr.strip())[:240])
    # Served: the probes over plain HTTP on their port, and nothing else there; the API over HTTPS
    # only to a client presenting a certificate of the CA (Redis without TLS here).
    rport, cport, pport = free_port(), free_port(), free_port()
    live = dict(tenv, RSC_REDIS=f"127.0.0.1:{rport}", RSC_ADVERTISE=f"127.0.0.1:{cport}",
                RSC_PROBE_LISTEN=f"127.0.0.1:{pport}")
    live.pop("RSC_REDIS_TLS_CA_FILE", None)
    live.pop("RSC_REDIS_PASSWORD_FILE", None)
    run_args = [a for a in local_args]
    run_args[run_args.index("--listen") + 1] = f"127.0.0.1:{cport}"
    procs = [subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--dir", tmp2,
                               "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        procs.append(subprocess.Popen([coord] + run_args, env=live, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(tmp2, "pod.log"), "w")))
        import ssl, urllib.error
        def status_of(url, ctx=None):
            try:
                return urllib.request.urlopen(url, timeout=2, context=ctx).status
            except urllib.error.HTTPError as e:
                return e.code
            except Exception:
                return 0
        status = 0
        deadline = time.time() + 10
        while time.time() < deadline and status != 200:
            status = status_of(f"http://127.0.0.1:{pport}{tc['readinessProbe']['httpGet']['path']}")
            if status != 200:
                time.sleep(0.1)
        check(status == 200, "a pod with the TLS overlay's settings answers its readiness probe on the plain probe port")
        check(status_of(f"http://127.0.0.1:{pport}{tc['livenessProbe']['httpGet']['path']}") == 200,
              "and its liveness probe")
        check(status_of(f"http://127.0.0.1:{pport}/metrics") == 404, "the probe port serves nothing but the probes")
        anon = ssl.create_default_context(cafile=os.path.join(tmp2, "ca.crt"))
        check(status_of(f"https://127.0.0.1:{cport}/healthz", anon) == 0,
              "the API port refuses a client without a certificate (mutual TLS)")
        mutual = ssl.create_default_context(cafile=os.path.join(tmp2, "ca.crt"))
        mutual.load_cert_chain(os.path.join(tmp2, "client.crt"), os.path.join(tmp2, "client.key"))
        check(status_of(f"https://127.0.0.1:{cport}/healthz", mutual) == 200,
              "and serves one presenting the client certificate")
        tls_env = {k: v for k, v in live.items() if k.startswith("RSC_TLS_") or k == "RSC_PROBE_LISTEN"}
        no_probe = {k: v for k, v in tls_env.items() if k != "RSC_PROBE_LISTEN"}
        check(healthy(tls_env, cport) == 0 and healthy(no_probe, cport) == 0
              and healthy({k: v for k, v in no_probe.items() if k != "RSC_TLS_CLIENT_CA_FILE"}, cport) != 0,
              "the image's health check passes on the HTTPS pod, by its probe port and by the API port with "
              "its own certificate under mutual TLS (and fails there without one)")
    finally:
        stop_all(procs)
finally:
    shutil.rmtree(tmp2, ignore_errors=True)
for kind, name in (("Deployment", "orders-billing-consumer"), ("StatefulSet", "orders-audit-consumer")):
    tcons = patches[(kind, name)]["spec"]["template"]["spec"]["containers"][0]
    tflags = [a for a in tcons["args"] if a.startswith("--")]
    check(all(f in usage.stdout + usage.stderr for f in tflags) and any(a.startswith("https://") for a in tcons["args"])
          and "--coordinator-cert-file" in tflags and "--coordinator-key-file" in tflags,
          f"the TLS {name} calls https:// with a client certificate and flags rsc-consume knows ({', '.join(tflags)})")

print(f"check-manifests: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
