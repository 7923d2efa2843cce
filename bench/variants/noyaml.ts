// What-if shim (bench/variants/hook.ts, "noyaml"): `yaml` is JSON.parse. With it the bench
// hands the agent its kubeconfig as JSON (YAML's subset), and the agent loads what it
// loads in a pod, where in-cluster credentials are read without any YAML parser.

export function parse(text: string): unknown {
  return JSON.parse(text);
}

export default { parse };
