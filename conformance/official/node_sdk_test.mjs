// LaunchDarkly's official Node server SDK against `flagsync serve`: the SDK side of
// node_sdk_test.py, which installs the SDK, starts serve and checks what this prints.
//
//     node node_sdk_test.mjs CONFIG_JSON
//
// CONFIG_JSON: {"sdkDir": folder whose node_modules holds @launchdarkly/node-server-sdk,
// "url": serve's URL, "sdkKey", "mode": "fdv1-streaming"|"fdv1-polling",
// "contexts": [context…], "flags": [key…], "dataPath": serve's data file,
// "edited": the data to write there (streaming only), "editedFlag": the key it changes,
// "caPath": a PEM file of the CA certificates to trust over HTTPS, or null for the
// system's, "payloadFilter": the payload filter key to configure, or null}.
//
// Prints one JSON line: {"sdkVersion", "initMs", "values": [{key: value}…] (one object
// per context), "changeMs" and "valuesAfter" (streaming only)}, or {"error"} and exits 1.

import { createRequire } from 'node:module';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const config = JSON.parse(process.argv[2]);
const require = createRequire(path.join(config.sdkDir, 'package.json'));
const ld = require('@launchdarkly/node-server-sdk');
// The package's exports do not include its package.json: read it from its folder.
const manifest = path.join(config.sdkDir, 'node_modules', '@launchdarkly', 'node-server-sdk', 'package.json');
const sdkVersion = JSON.parse(readFileSync(manifest, 'utf8')).version;

const INIT_TIMEOUT_S = 5;
const CHANGE_TIMEOUT_MS = 5000;

async function valuesFor(client) {
  const all = [];
  for (const context of config.contexts) {
    const values = {};
    for (const key of config.flags) {
      values[key] = await client.variation(key, context, null);
    }
    all.push(values);
  }
  return all;
}

/** Edit the data file atomically; resolves with the milliseconds until the client saw it. */
function edit(client) {
  return new Promise((resolve, reject) => {
    let edited;
    const timer = setTimeout(
      () => reject(new Error('the edit of the data file never reached the client')),
      CHANGE_TIMEOUT_MS,
    );
    client.on(`update:${config.editedFlag}`, () => {
      clearTimeout(timer);
      resolve(Number(process.hrtime.bigint() - edited) / 1e6);
    });
    const tmp = `${config.dataPath}.tmp`;
    writeFileSync(tmp, JSON.stringify(config.edited));
    edited = process.hrtime.bigint();
    renameSync(tmp, config.dataPath);
  });
}

async function main() {
  const logger = ld.basicLogger({ level: 'warn', destination: (line) => console.error(line) });
  const started = process.hrtime.bigint();
  const client = ld.init(config.sdkKey, {
    baseUri: config.url,
    streamUri: config.url,
    eventsUri: config.url,
    stream: config.mode === 'fdv1-streaming',
    // Streaming, polling and events all go through the agent these make.
    ...(config.caPath ? { tlsParams: { ca: readFileSync(config.caPath, 'utf8') } } : {}),
    ...(config.payloadFilter ? { payloadFilterKey: config.payloadFilter } : {}),
    logger,
  });
  const out = { sdkVersion };
  try {
    await client.waitForInitialization({ timeout: INIT_TIMEOUT_S });
    out.initMs = Number(process.hrtime.bigint() - started) / 1e6;
    if (!client.initialized()) {
      throw new Error('waitForInitialization resolved, but the client is not initialized');
    }
    out.values = await valuesFor(client);
    if (config.mode === 'fdv1-streaming') {
      out.changeMs = await edit(client);
      out.valuesAfter = await valuesFor(client);
    }
    // The events: feature, index and summary came with the evaluations above.
    client.identify(config.contexts[0]);
    client.track('flagsync-custom', config.contexts[1], { n: 1 }, 2.5);
    await client.flush();
  } finally {
    client.close();
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.log(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
});
