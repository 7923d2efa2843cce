// Prints, as JSON, the resource attributes OpenTelemetry's JavaScript SDK detects from this
// process's environment (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): what an SDK in a
// container whose env this is would report. Run with Node 24 from this folder.
import { detectResources, envDetector } from '@opentelemetry/resources';

const resource = detectResources({ detectors: [envDetector] });
await resource.waitForAsyncAttributes?.();
process.stdout.write(JSON.stringify(resource.attributes));
