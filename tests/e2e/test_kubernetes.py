#!/usr/bin/python3
"""
deploy/kubernetes (issue 17, docs/fleet.md) renders with `kubectl kustomize`
and says what the design says: sandgate as a Deployment of two replicas
behind a Service; the CA, vault key and vault as Secrets mounted into the
sandgate pods only; the policies as a ConfigMap mounted as a directory with
policies_watch on; a SandboxTemplate (agent-sandbox, extensions.agents.x-k8s.io)
under gVisor whose clients all go through the Service with the sandbox's
own proxy token and trust the CA bundle, and whose egress reaches the
gateway and the cluster's DNS only. The rendered config and policies pass
`sandgate policy check`. No cluster runs here: nothing is applied.

The key material the kustomization reads (never committed) is made by
sandgate itself in a copy of the directory, as files/README.md says.
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402

try:
    import yaml
except ImportError:
    yaml = None

KUBECTL = os.environ.get("SANDGATE_KUBECTL", "/usr/bin/kubectl")
DEPLOY = os.path.join(T.SRC, "deploy", "kubernetes")
SVC = "sandgate.sandgate.svc.cluster.local"


class KubernetesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if yaml is None:
            T.skip_file("python3-yaml is not installed")
        if not os.access(KUBECTL, os.X_OK):
            T.skip_file(KUBECTL + " is missing (kubernetes-client)")
        cls.td = T.TempDir("sgk8s-")
        cls.addClassCleanup(cls.td.cleanup)
        cls.dir = cls.td.join("kubernetes")
        shutil.copytree(DEPLOY, cls.dir)
        cls.make_files()
        r = subprocess.run([KUBECTL, "kustomize", cls.dir],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=T.clean_env(HOME=cls.td.path),
                           timeout=120)
        if r.returncode != 0:
            raise AssertionError("kubectl kustomize failed:\n" + r.stderr)
        cls.objs = [o for o in yaml.safe_load_all(r.stdout) if o]
        cls.rendered = r.stdout

    @classmethod
    def make_files(cls):
        """ca init and vault set in a scratch config, copied into files/."""
        work = cls.td.join("keys")
        os.makedirs(work)
        cfg = os.path.join(work, "sandgate.yaml")
        with open(cfg, "w") as f:
            f.write("state_dir: ./var\npolicies: []\n")
        r = T.run_sandgate("ca", "init", "-c", cfg)
        assert r.returncode == 0, r.stderr
        r = T.run_sandgate("vault", "set", "demo", "-c", cfg,
                           input="not-a-real-secret")
        assert r.returncode == 0, r.stderr
        files = os.path.join(cls.dir, "files")
        for src in ("certs/ca.crt", "certs/ca.key", "certs/audit.key",
                    "certs/audit.pub", "certs/vault.key", "var/vault.db"):
            shutil.copy(os.path.join(work, src), files)
        with open(os.path.join(files, "ca-bundle.crt"), "w") as out, \
                open(os.path.join(work, "certs", "ca.crt")) as ca:
            out.write(ca.read())
        with open(os.path.join(work, "certs", "ca.crt")) as f:
            cls.ca_pem = f.read()

    def obj(self, kind, name, namespace=None):
        found = [o for o in self.objs if o["kind"] == kind and
                 o["metadata"]["name"] == name and
                 (namespace is None or
                  o["metadata"].get("namespace") == namespace)]
        self.assertEqual(len(found), 1, "%s/%s: %d objects" %
                         (kind, name, len(found)))
        return found[0]

    def test_gateway_deployment_and_service(self):
        d = self.obj("Deployment", "sandgate", "sandgate")
        self.assertEqual(d["spec"]["replicas"], 2)
        pod = d["spec"]["template"]["spec"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        self.assertFalse(pod["automountServiceAccountToken"])
        c = [x for x in pod["containers"] if x["name"] == "sandgate"][0]
        self.assertEqual(c["args"], ["serve", "-c",
                                     "/etc/sandgate/sandgate.yaml"])
        self.assertEqual(c["securityContext"]["capabilities"]["drop"],
                         ["ALL"])
        svc = self.obj("Service", "sandgate", "sandgate")
        self.assertEqual(svc["spec"]["selector"],
                         {"app.kubernetes.io/name":
                          labels["app.kubernetes.io/name"]})
        ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
        self.assertEqual(ports["http-proxy"], 3128)
        self.assertEqual(ports["socks5"], 1080)
        cports = {p["name"] for p in c["ports"]}
        for p in svc["spec"]["ports"]:
            self.assertIn(p["targetPort"], cports)

    def test_secrets_only_in_sandgate(self):
        keys = self.obj("Secret", "sandgate-keys", "sandgate")
        self.assertEqual(set(keys["data"]), {"ca.crt", "ca.key", "vault.key",
                                             "audit.key", "audit.pub"})
        vault = self.obj("Secret", "sandgate-vault", "sandgate")
        self.assertEqual(set(vault["data"]), {"vault.db"})
        secret_names = {"sandgate-keys", "sandgate-vault",
                        "sandgate-fleet-store"}
        # Every pod spec that names one of them is sandgate's.
        for o in self.objs:
            text = yaml.safe_dump(o)
            for s in secret_names:
                if s in text and o["kind"] not in ("Secret",):
                    self.assertEqual((o["kind"], o["metadata"]["name"]),
                                     ("Deployment", "sandgate"),
                                     "%s appears in %s/%s" %
                                     (s, o["kind"], o["metadata"]["name"]))
        tmpl = self.obj("SandboxTemplate", "agent", "agents")
        self.assertNotIn("secret", yaml.safe_dump(tmpl).lower())
        d = self.obj("Deployment", "sandgate", "sandgate")
        vols = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}
        self.assertEqual(vols["keys"]["secret"]["secretName"], "sandgate-keys")
        self.assertEqual(vols["keys"]["secret"]["defaultMode"], 0o400)
        mounts = {m["name"]: m for m in d["spec"]["template"]["spec"]
                  ["containers"][0]["volumeMounts"]}
        self.assertTrue(mounts["keys"]["readOnly"])

    def test_policies_configmap_watched(self):
        cm = self.obj("ConfigMap", "sandgate-policies", "sandgate")
        self.assertIn("sandboxes.yaml", cm["data"])
        d = self.obj("Deployment", "sandgate", "sandgate")
        spec = d["spec"]["template"]["spec"]
        vols = {v["name"]: v for v in spec["volumes"]}
        self.assertEqual(vols["policies"]["configMap"]["name"],
                         "sandgate-policies")
        m = [x for x in spec["containers"][0]["volumeMounts"]
             if x["name"] == "policies"][0]
        # A subPath mount is never updated by the kubelet.
        self.assertNotIn("subPath", m)
        cfg = yaml.safe_load(self.obj("ConfigMap", "sandgate-config",
                                      "sandgate")["data"]["sandgate.yaml"])
        self.assertIs(cfg["policies_watch"], True)
        self.assertEqual(cfg["policies"], [m["mountPath"]])
        self.assertTrue(cfg["audit"]["ship"]["url"].startswith(
            "postgresql://"))

    def test_rendered_config_passes_policy_check(self):
        cfg = self.obj("ConfigMap", "sandgate-config",
                       "sandgate")["data"]["sandgate.yaml"]
        cm = self.obj("ConfigMap", "sandgate-policies", "sandgate")["data"]
        pol = self.td.join("check", "policies")
        os.makedirs(pol)
        for name, text in cm.items():
            with open(os.path.join(pol, name), "w") as f:
                f.write(text)
        cfg = cfg.replace("/etc/sandgate/policies", pol)
        path = self.td.join("check", "sandgate.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        r = T.run_sandgate("policy", "check", "-c", path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_sandbox_template(self):
        t = self.obj("SandboxTemplate", "agent", "agents")
        self.assertEqual(t["apiVersion"], "extensions.agents.x-k8s.io/v1beta1")
        pod = t["spec"]["podTemplate"]["spec"]
        self.assertEqual(pod["runtimeClassName"], "gvisor")
        self.assertFalse(pod["automountServiceAccountToken"])
        c = pod["containers"][0]
        env = [e["name"] for e in c["env"]]
        vals = {e["name"]: e.get("value") for e in c["env"]}
        # Per-sandbox identity: the claim's id and token in the proxy URL;
        # both are defined before the variables that use them.
        for var, scheme, port in (("HTTPS_PROXY", "http", 3128),
                                  ("HTTP_PROXY", "http", 3128),
                                  ("ALL_PROXY", "socks5h", 1080)):
            self.assertEqual(vals[var], "%s://$(SANDGATE_SANDBOX_ID):"
                             "$(SANDGATE_PROXY_TOKEN)@%s:%d" %
                             (scheme, SVC, port))
            self.assertLess(env.index("SANDGATE_PROXY_TOKEN"), env.index(var))
        self.assertIn(t["spec"]["envVarsInjectionPolicy"],
                      ("Allowed", "Overrides"))
        # The CA bundle, mounted and named for the usual clients.
        vols = {v["name"]: v for v in pod["volumes"]}
        mount = [m for m in c["volumeMounts"] if m["name"] == "sandgate-ca"][0]
        cmname = vols["sandgate-ca"]["configMap"]["name"]
        bundle = self.obj("ConfigMap", cmname, "agents")["data"]
        self.assertIn(self.ca_pem.strip(), bundle["ca-bundle.crt"])
        for var in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                    "AWS_CA_BUNDLE"):
            self.assertEqual(vals[var], mount["mountPath"] + "/ca-bundle.crt")

    def test_sandbox_egress_only_gateway_and_dns(self):
        t = self.obj("SandboxTemplate", "agent", "agents")
        self.assertEqual(t["spec"]["networkPolicyManagement"], "Managed")
        np = t["spec"]["networkPolicy"]
        self.assertEqual(np.get("ingress", []), [])
        egress = np["egress"]
        self.assertEqual(len(egress), 2)
        gw, dns = egress
        peer = gw["to"][0]
        self.assertEqual(peer["namespaceSelector"]["matchLabels"],
                         {"kubernetes.io/metadata.name": "sandgate"})
        d = self.obj("Deployment", "sandgate", "sandgate")
        self.assertEqual(peer["podSelector"]["matchLabels"],
                         d["spec"]["selector"]["matchLabels"])
        self.assertEqual({(p["protocol"], p["port"]) for p in gw["ports"]},
                         {("TCP", 3128), ("TCP", 1080)})
        self.assertEqual(dns["to"][0]["podSelector"]["matchLabels"],
                         {"k8s-app": "kube-dns"})
        self.assertEqual({(p["protocol"], p["port"]) for p in dns["ports"]},
                         {("UDP", 53), ("TCP", 53)})
        for rule in egress:
            for peer in rule["to"]:
                self.assertNotIn("ipBlock", peer)

    def test_gateway_starts_with_the_granted_capabilities(self):
        """serve drops to user sandgate holding only what the Deployment adds."""
        if os.geteuid() != 0:
            self.skipTest("needs root to start sandgate with a bounding set")
        d = self.obj("Deployment", "sandgate", "sandgate")
        sc = d["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        self.assertEqual(sc["runAsUser"], 0)
        caps = sc["capabilities"]["add"]
        bset = "-all," + ",".join("+" + c.lower() for c in caps)

        class NoDns:
            addr = "127.0.0.1:53"
        tmp = self.td.join("caps")
        os.makedirs(tmp)
        gw = T.Gateway(tmp, NoDns(), {}, user="sandgate",
                       extra={"policies_watch": True})
        gw.proc = T.Proc(["/usr/bin/setpriv", "--bounding-set", bset, "--",
                          T.BIN, "serve", "-c", gw.cfg_path], gw.log_path,
                         cwd=tmp)
        self.addCleanup(gw.stop)
        self.assertTrue(T.wait_tcp("127.0.0.1", gw.port, 10 * T.SLOW,
                                   gw.proc), gw.log_tail())
        self.assertTrue(gw.wait_log(r"privileges: running as sandgate .*no "
                                    r"capabilities"), gw.log_tail())
        gw.stop()
        # One fewer, on a fresh state directory as an emptyDir is, and the
        # drop refuses to run.
        for missing in caps:
            fewer = "-all," + ",".join("+" + c.lower() for c in caps
                                       if c != missing)
            sub = self.td.join("caps-" + missing)
            os.makedirs(sub)
            g = T.Gateway(sub, NoDns(), {}, user="sandgate")
            p = T.Proc(["/usr/bin/setpriv", "--bounding-set", fewer, "--",
                        T.BIN, "serve", "-c", g.cfg_path], g.log_path, cwd=sub)
            try:
                rc = p.p.wait(30 * T.SLOW)
            except subprocess.TimeoutExpired:
                rc = None
            p.stop()
            self.assertEqual(rc, 1, "without %s: %s" % (missing, p.log_tail()))
            self.assertIn("Operation not permitted", p.log_text())

    def test_standalone_egress_policy_matches_template(self):
        t = self.obj("SandboxTemplate", "agent", "agents")
        np = self.obj("NetworkPolicy", "sandboxes-egress", "agents")
        self.assertEqual(np["spec"]["policyTypes"], ["Egress"])
        self.assertEqual(np["spec"]["egress"], t["spec"]["networkPolicy"]
                         ["egress"])
        labels = t["spec"]["podTemplate"]["metadata"]["labels"]
        for k, v in np["spec"]["podSelector"]["matchLabels"].items():
            self.assertEqual(labels.get(k), v)

    def test_ingress_through_gateway_api(self):
        r = self.obj("HTTPRoute", "sandgate-ingress", "sandgate")
        self.assertEqual(r["apiVersion"], "gateway.networking.k8s.io/v1")
        backend = r["spec"]["rules"][0]["backendRefs"][0]
        self.assertEqual((backend["name"], backend["port"]), ("sandgate", 8080))

    def test_no_key_material_committed(self):
        r = subprocess.run(["git", "-C", T.SRC, "ls-files", "--error-unmatch",
                            "deploy/kubernetes/kustomization.yaml"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode != 0:
            self.skipTest("not a git checkout with deploy/kubernetes committed")
        out = subprocess.run(["git", "-C", T.SRC, "ls-files",
                              "deploy/kubernetes/files"],
                             stdout=subprocess.PIPE, text=True).stdout.split()
        self.assertEqual(sorted(os.path.basename(f) for f in out),
                         [".gitignore", "README.md"])
        for f in out:
            with open(os.path.join(T.SRC, f)) as fh:
                self.assertIsNone(re.search(r"PRIVATE KEY", fh.read()))


if __name__ == "__main__":
    T.require_binary()
    unittest.main(verbosity=2)
