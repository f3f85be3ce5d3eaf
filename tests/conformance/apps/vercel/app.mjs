// The Vercel AI SDK (`ai` + `@ai-sdk/openai`) with `experimental_telemetry`, exported over OTLP/HTTP.
//
// The conversation id goes in `experimental_telemetry.metadata.sessionId` (the span attribute
// `ai.telemetry.metadata.sessionId`). The tool conversation uses generateText with a tool and
// `stopWhen: stepCountIs(5)`; the others use streamText, so both span shapes are recorded.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createOpenAI } from "@ai-sdk/openai";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const exporter = new OTLPTraceExporter({ url: `${process.env.OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces` });
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": process.env.OTEL_SERVICE_NAME }),
  spanProcessors: [new BatchSpanProcessor(exporter)],
});
provider.register(); // the async context manager that nests the SDK's spans
const tracer = provider.getTracer("conformance-vercel-ai");
const openai = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: "sk-conformance" });
const model = openai.chat(plan.model);
const tools = {
  [plan.tool.name]: tool({
    description: plan.tool.description,
    inputSchema: z.object({ order_id: z.string() }),
    execute: async ({ order_id }) => plan.tool.results[order_id] ?? `No order ${order_id}.`,
  }),
};

for (const conversation of plan.conversations) {
  const telemetry = {
    isEnabled: true,
    tracer,
    functionId: "support-chat",
    metadata: { sessionId: plan.prefix + conversation.id },
  };
  const messages = [];
  const useTools = conversation.id.startsWith("tool");
  for (const text of conversation.user_turns) {
    messages.push({ role: "user", content: text });
    const options = { model, system: plan.system, messages, temperature: 0, experimental_telemetry: telemetry };
    if (useTools) {
      const result = await generateText({ ...options, tools, stopWhen: stepCountIs(5) });
      messages.push(...result.response.messages);
    } else {
      const result = streamText(options);
      await result.consumeStream();
      messages.push(...(await result.response).messages);
    }
  }
  await provider.forceFlush();
}
await provider.shutdown();

const require = createRequire(import.meta.url);
const versions = {};
for (const name of ["ai", "@ai-sdk/openai", "@opentelemetry/sdk-trace-node", "@opentelemetry/exporter-trace-otlp-proto"]) {
  versions[name] = require(`${name}/package.json`).version;
}
console.log(JSON.stringify({ versions }));
