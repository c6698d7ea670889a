// Reads a JSON array of Kubernetes resources on stdin and validates each KafkaTopic against the schema generated
// from Strimzi's CRDs (the package's validators). Prints one JSON line per resource: {"name", "errors"}.
import { KafkaTopic } from "@kubernetes-models/strimzi-kafka-operator/kafka.strimzi.io/v1beta2/KafkaTopic";

let input = "";
for await (const chunk of process.stdin) input += chunk;
for (const resource of JSON.parse(input)) {
  let errors = null;
  try {
    new KafkaTopic(resource).validate();
  } catch (error) {
    errors = String(error.message ?? error);
  }
  console.log(JSON.stringify({ name: resource?.metadata?.name ?? null, errors }));
}
