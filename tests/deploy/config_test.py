#!/usr/bin/env python3
"""Static checks of deploy/ with the programs that read those files, one group per ctest test:

  --check prometheus  promtool check config / check rules / test rules (the alert unit tests)
  --check manifests   yamllint; every YAML parses; Kubernetes manifests against the Kubernetes
                      API's schema as Debian's python3-kubernetes models carry it (no kubeconform
                      or kubeval is packaged for Debian or npm); the compose file with
                      docker-compose's own schema (`docker-compose config`); Dockerfiles, Grafana
                      provisioning and dashboards, Prometheus targets, and the references between
                      all of them (ports, Secret names, uids, mounted paths); shellcheck on the
                      shell scripts
  --check systemd     systemd-analyze verify of the units, in a scratch root holding the real
                      binaries at the paths the units name

Exit 77 (skipped) only when the program a group needs is not installed.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_support as ds  # noqa: E402

errors = []


def error(message):
    errors.append(message)


def need(*programs):
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed (scripts/install-deps installs it)")
        sys.exit(ds.SKIP)


def run_tool(argv, cwd=None):
    result = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        error(f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}")
    return result


# ------------------------------------------------------------------------------ prometheus
def check_prometheus(deploy):
    need("promtool")
    prom = f"{deploy}/prometheus"
    run_tool(["promtool", "check", "config", "prometheus.yml"], cwd=prom)
    rules = sorted(glob.glob(f"{prom}/rules/*.yml"))
    if not rules:
        error("no rule file under deploy/prometheus/rules")
    run_tool(["promtool", "check", "rules", *rules])
    tests = sorted(glob.glob(f"{prom}/tests/*.yml"))
    if not tests:
        error("no rule unit test under deploy/prometheus/tests")
    result = run_tool(["promtool", "test", "rules", *tests], cwd=f"{prom}/tests")
    print(result.stdout.strip())
    # Every alert has a unit test that expects it to fire.
    with open(rules[0]) as f:
        alerts = {r["alert"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]
                  if "alert" in r}
    fired = set()
    for path in tests:
        with open(path) as f:
            for case in yaml.safe_load(f)["tests"]:
                for t in case.get("alert_rule_test", []):
                    if t.get("exp_alerts"):
                        fired.add(t["alertname"])
    if alerts - fired:
        error(f"alerts no unit test sees firing: {sorted(alerts - fired)}")


# ------------------------------------------------------------------------------ kubernetes
def k8s_model(api_version, kind):
    """The python3-kubernetes model class of a built-in kind (V1Deployment for apps/v1
    Deployment), or None."""
    import kubernetes.client as client
    version = api_version.split("/")[-1]
    return getattr(client, version[0].upper() + version[1:] + kind, None)


def check_against_model(value, type_name, path):
    """Checks `value` against a python3-kubernetes type name ('V1PodSpec', 'list[V1Container]',
    'dict(str, str)', 'str', 'int', 'bool', 'object'); returns the deserialised value, so the
    model constructors can check required fields and enums afterwards."""
    import kubernetes.client as client
    if type_name.startswith("list["):
        if not isinstance(value, list):
            error(f"{path}: expected a list, got {type(value).__name__}")
            return []
        return [check_against_model(v, type_name[5:-1], f"{path}[{i}]")
                for i, v in enumerate(value)]
    if type_name.startswith("dict("):
        inner = type_name[5:-1].split(", ", 1)[1]
        if not isinstance(value, dict):
            error(f"{path}: expected a map, got {type(value).__name__}")
            return {}
        return {k: check_against_model(v, inner, f"{path}.{k}") for k, v in value.items()}
    if type_name == "str":
        if not isinstance(value, str):
            error(f"{path}: expected a string, got {value!r} (quote it)")
        return value
    if type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            error(f"{path}: expected an integer, got {value!r}")
        return value
    if type_name == "bool":
        if not isinstance(value, bool):
            error(f"{path}: expected a boolean, got {value!r}")
        return value
    if type_name in ("object", "float", "datetime", "date"):
        return value  # IntOrString and free-form fields.
    model = getattr(client, type_name, None)
    if model is None:
        error(f"{path}: unknown model {type_name}")
        return value
    if not isinstance(value, dict):
        error(f"{path}: expected an object ({type_name}), got {value!r}")
        return None
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    kwargs = {}
    for key, item in value.items():
        attr = by_json.get(key)
        if attr is None:
            error(f"{path}.{key}: no such field in {type_name} "
                  f"(fields: {', '.join(sorted(by_json))})")
            continue
        kwargs[attr] = check_against_model(item, model.openapi_types[attr], f"{path}.{key}")
    try:
        return model(**kwargs)  # Raises ValueError for a missing required field or bad enum.
    except (ValueError, TypeError) as e:
        error(f"{path} ({type_name}): {e}")
        return None


def check_pod_monitor(doc, path):
    """The fields of monitoring.coreos.com/v1 PodMonitor that deploy/k8s uses; the operator's
    CRD schema is not packaged, so this checks those by hand."""
    spec = doc.get("spec", {})
    allowed = {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel",
               "podTargetLabels", "sampleLimit"}
    for key in spec:
        if key not in allowed:
            error(f"{path}.spec.{key}: not a PodMonitor field")
    if not spec.get("selector", {}).get("matchLabels"):
        error(f"{path}: PodMonitor without spec.selector.matchLabels")
    endpoint_fields = {"port", "path", "interval", "scrapeTimeout", "relabelings",
                       "metricRelabelings", "scheme", "honorLabels"}
    relabel_fields = {"sourceLabels", "separator", "targetLabel", "regex", "modulus",
                      "replacement", "action"}
    for i, endpoint in enumerate(spec.get("podMetricsEndpoints") or []):
        for key in endpoint:
            if key not in endpoint_fields:
                error(f"{path}.podMetricsEndpoints[{i}].{key}: not a PodMetricsEndpoint field")
        for j, relabel in enumerate(endpoint.get("relabelings", [])):
            for key in relabel:
                if key not in relabel_fields:
                    error(f"{path}.podMetricsEndpoints[{i}].relabelings[{j}].{key}: unknown")
    if not spec.get("podMetricsEndpoints"):
        error(f"{path}: PodMonitor without podMetricsEndpoints")


def check_kubernetes(deploy):
    docs = []
    for path in sorted(glob.glob(f"{deploy}/k8s/*.yaml")):
        with open(path) as f:
            for n, doc in enumerate(yaml.safe_load_all(f)):
                if doc is not None:
                    docs.append((f"{os.path.basename(path)}#{n}", doc))
    kinds = {}
    for where, doc in docs:
        kind, api = doc.get("kind"), doc.get("apiVersion")
        kinds.setdefault(kind, []).append((where, doc))
        if doc.get("metadata", {}).get("namespace", "ptxbench") != "ptxbench" and kind != "Namespace":
            error(f"{where}: namespace is not ptxbench")
        if api == "monitoring.coreos.com/v1" and kind == "PodMonitor":
            check_pod_monitor(doc, where)
            continue
        model = k8s_model(api or "", kind or "")
        if model is None:
            error(f"{where}: {api} {kind} is not a Kubernetes kind this check knows")
            continue
        check_against_model(doc, model.__name__, f"{where}:{kind}")

    secrets = {doc["metadata"]["name"]: doc for _, doc in kinds.get("Secret", [])}
    daemonsets = kinds.get("DaemonSet", [])
    products = set()
    for where, doc in daemonsets + kinds.get("Deployment", []):
        spec = doc["spec"]
        labels = spec["template"]["metadata"].get("labels", {})
        for key, value in spec["selector"].get("matchLabels", {}).items():
            if labels.get(key) != value:
                error(f"{where}: selector {key}={value} does not match the pod template's labels")
        for container in spec["template"]["spec"]["containers"]:
            command = container.get("command", []) + container.get("args", [])
            for item in command:
                if item.startswith("/opt/ptxbench/bin/") and os.path.basename(item) not in (
                        "ptxbench-server", "ptxbench-worker", "ptxbench"):
                    error(f"{where}: {item} is not one of our programs")
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    secret = secrets.get(ref["name"])
                    if secret is None or ref["key"] not in secret.get("stringData", {}):
                        error(f"{where}: Secret {ref['name']} key {ref['key']} is not in "
                              "secrets.example.yaml")
    for where, doc in daemonsets:
        pod = doc["spec"]["template"]["spec"]
        product = pod.get("nodeSelector", {}).get("nvidia.com/gpu.product", "")
        short = "H100" if "H100" in product else "B200" if "B200" in product else product
        products.add(short)
        arch = doc["spec"]["template"]["metadata"]["labels"].get("ptxbench.dev/arch")
        expected_arch = {"H100": "sm_90a", "B200": "sm_100a"}.get(short)
        if arch != expected_arch:
            error(f"{where}: arch label {arch} for GPU product {product}")
        ports = set()
        for container in pod["containers"]:
            resources = container.get("resources", {})
            for part in ("requests", "limits"):
                if resources.get(part, {}).get("nvidia.com/gpu") != "1":
                    error(f"{where}: container {container['name']} {part} nvidia.com/gpu is not 1")
            args = container.get("args", [])
            listen = args[args.index("--metrics-listen") + 1] if "--metrics-listen" in args else ""
            port = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            name = f"metrics-{container['name']}"
            if port.get(name) is None or not listen.endswith(f":{port[name]}"):
                error(f"{where}: container {container['name']} listens on {listen!r} but "
                      f"declares {port}")
            ports.add(name)
        monitored = {e["port"] for _, d in kinds.get("PodMonitor", [])
                     if d["metadata"]["name"] == "ptxbench-worker"
                     for e in d["spec"]["podMetricsEndpoints"]}
        if ports - monitored:
            error(f"{where}: metrics ports {sorted(ports - monitored)} not in the PodMonitor")
    if products != {"H100", "B200"}:
        error(f"worker DaemonSets select GPU products {sorted(products)}, not H100 and B200")
    for where, doc in kinds.get("Service", []):
        selector = doc["spec"]["selector"]
        if not any(all(d["spec"]["template"]["metadata"]["labels"].get(k) == v
                       for k, v in selector.items()) for _, d in kinds.get("Deployment", [])):
            error(f"{where}: Service selector {selector} matches no Deployment")
    print(f"kubernetes: {len(docs)} manifests checked ({', '.join(sorted(kinds))})")


# ------------------------------------------------------------------------------ compose etc.
def check_compose(root, deploy):
    folder = f"{deploy}/docker"
    compose = f"{folder}/compose.yaml"
    if shutil.which("docker-compose"):
        run_tool(["docker-compose", "-f", compose, "--env-file", f"{folder}/env.example",
                  "config", "-q"])
    else:
        error("docker-compose is not installed (scripts/install-deps installs it): the compose "
              "file was not checked against its schema")
    with open(compose) as f:
        spec = yaml.safe_load(f)
    services = spec["services"]
    for required in ("postgres", "server", "worker-gpu0", "prometheus", "grafana"):
        if required not in services:
            error(f"compose.yaml has no service {required}")
    for name, service in services.items():
        build = service.get("build")
        if build:
            context = os.path.normpath(os.path.join(folder, build["context"]))
            if context != root:
                error(f"compose {name}: build context {context} is not the repository root")
            if not os.path.exists(os.path.join(context, build["dockerfile"])):
                error(f"compose {name}: no Dockerfile {build['dockerfile']}")
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                if not os.path.exists(os.path.normpath(os.path.join(folder, source))):
                    error(f"compose {name}: volume source {source} does not exist")
    gpu = services["worker-gpu0"]["deploy"]["resources"]["reservations"]["devices"][0]
    if gpu.get("capabilities") != ["gpu"]:
        error("compose worker-gpu0 reserves no GPU")
    grafana_mounts = dict(v.split(":")[:2] for v in services["grafana"]["volumes"])
    with open(f"{deploy}/grafana/provisioning/dashboards/ptxbench.yml") as f:
        provider = yaml.safe_load(f)["providers"][0]["options"]["path"]
    if grafana_mounts.get("../grafana/dashboards") != provider:
        error(f"grafana dashboards mounted at {grafana_mounts.get('../grafana/dashboards')}, "
              f"provisioned from {provider}")
    for name in ("PTXBENCH_PROMETHEUS_URL", "PTXBENCH_GRAFANA_DB_HOST"):
        if name not in services["grafana"]["environment"]:
            error(f"compose grafana does not set {name} (provisioning/datasources uses it)")

    for dockerfile in sorted(glob.glob(f"{folder}/*.Dockerfile")):
        text = open(dockerfile).read()
        base = os.path.basename(dockerfile)
        if not re.search(r"^FROM \S+", text, re.M):
            error(f"{base}: no FROM")
        if "ADD ${BUNDLE} /opt/" not in text:
            error(f"{base}: does not unpack the device bundle into /opt")
        for program in re.findall(r"/opt/ptxbench/bin/([a-z-]+)", text):
            if program not in ("ptxbench-server", "ptxbench-worker", "ptxbench"):
                error(f"{base}: /opt/ptxbench/bin/{program} is not one of our programs")
    worker = open(f"{folder}/worker.Dockerfile").read()
    if not re.search(r"^FROM nvidia/cuda:13\.\S*runtime", worker, re.M):
        error("worker.Dockerfile is not based on a CUDA 13 runtime image")
    scripts = [f"{deploy}/slurm/ptxbench-workers.sbatch",
               f"{folder}/postgres-init/10-grafana-reader.sh"]
    run_tool(["shellcheck", *scripts])


def check_grafana_and_targets(root, deploy):
    with open(f"{deploy}/grafana/provisioning/datasources/ptxbench.yml") as f:
        sources = {s["uid"]: s for s in yaml.safe_load(f)["datasources"]}
    if set(sources) != {ds.PROMETHEUS_UID, ds.POSTGRES_UID}:
        error(f"provisioned data sources {sorted(sources)}")
    for name, dashboard in ds.load_dashboards(root).items():
        ids = [p.get("id") for p in ds.panels(dashboard)]
        if len(ids) != len(set(ids)):
            error(f"{name}: duplicate panel ids")
        for panel in ds.panels(dashboard):
            if panel.get("type") == "row":
                continue
            uid = panel.get("datasource", {}).get("uid")
            if uid not in sources:
                error(f"{name} / {panel.get('title')}: data source {uid} is not provisioned")
            elif panel["datasource"]["type"] != sources[uid]["type"]:
                error(f"{name} / {panel.get('title')}: data source type mismatch")
            if not panel.get("targets"):
                error(f"{name} / {panel.get('title')}: no query")
            for target in panel.get("targets", []):
                if not (target.get("expr") or target.get("rawSql")):
                    error(f"{name} / {panel.get('title')}: empty query")
    for path in glob.glob(f"{deploy}/prometheus/targets/*.yml"):
        with open(path) as f:
            for group in yaml.safe_load(f):
                arch = group.get("labels", {}).get("arch")
                if arch not in ("sm_90a", "sm_100a", "compile_only"):
                    error(f"{path}: target group {group['targets']} has arch {arch!r}")


def check_manifests(root, deploy):
    need("yamllint", "shellcheck")
    run_tool(["yamllint", "--strict", "-c", f"{deploy}/.yamllint.yml", deploy])
    count = 0
    for path in glob.glob(f"{deploy}/**/*.y*ml", recursive=True):
        with open(path) as f:
            try:
                count += len([d for d in yaml.safe_load_all(f) if d is not None])
            except yaml.YAMLError as e:
                error(f"{path}: {e}")
    print(f"yaml: {count} documents parse")
    check_kubernetes(deploy)
    check_compose(root, deploy)
    check_grafana_and_targets(root, deploy)


# ------------------------------------------------------------------------------ systemd
def check_systemd(deploy, bin_dir):
    need("systemd-analyze")
    units = sorted(glob.glob(f"{deploy}/systemd/*.service"))
    scratch = tempfile.mkdtemp(prefix="ptxbench-systemd-")
    try:
        # The root holds the system's own units (sysinit.target and the rest a unit's default
        # dependencies need) and our real programs where the units expect them.
        os.makedirs(f"{scratch}/usr/lib/systemd")
        shutil.copytree("/usr/lib/systemd/system", f"{scratch}/usr/lib/systemd/system",
                        symlinks=True)
        os.makedirs(f"{scratch}/etc/systemd/system")
        os.makedirs(f"{scratch}/opt/ptxbench/bin")
        for program in ("ptxbench-server", "ptxbench-worker"):
            source = f"{bin_dir}/{program}"
            if not os.path.exists(source):
                ds.fail(f"{source} is not built")
            try:
                os.link(source, f"{scratch}/opt/ptxbench/bin/{program}")
            except OSError:
                shutil.copy2(source, f"{scratch}/opt/ptxbench/bin/{program}")
        names = []
        for unit in units:
            shutil.copy(unit, f"{scratch}/etc/systemd/system/")
            name = os.path.basename(unit)
            names.append(name.replace("@.service", "@0.service"))
        # verify exits 0 on many problems it only prints ("Unknown key", "Failed to parse"):
        # any output is a failure.
        result = subprocess.run(["systemd-analyze", "verify", f"--root={scratch}", *names],
                                cwd=f"{scratch}/etc/systemd/system", stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=60)
        if result.returncode != 0 or result.stdout.strip():
            error(f"systemd-analyze verify {' '.join(names)} exited {result.returncode}:\n"
                  f"{result.stdout}")
        print(f"systemd: {len(names)} units verified ({', '.join(names)})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--bin-dir")
    parser.add_argument("--check", required=True, choices=["prometheus", "manifests", "systemd"])
    args = parser.parse_args()
    root = os.path.abspath(args.source_dir)
    deploy = f"{root}/deploy"
    if args.check == "prometheus":
        check_prometheus(deploy)
    elif args.check == "manifests":
        check_manifests(root, deploy)
    else:
        check_systemd(deploy, os.path.abspath(args.bin_dir))
    if errors:
        ds.fail("\n".join(errors))
    print(f"deploy {args.check}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
