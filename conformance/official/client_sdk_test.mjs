// LaunchDarkly's client-side SDK for Node.js (launchdarkly-node-client-sdk) against
// `flagsync serve`'s client-side endpoints: the SDK side of client_sdk_test.py, which
// installs the SDK, starts serve and checks what this prints.
//
//     node client_sdk_test.mjs CONFIG_JSON
//
// CONFIG_JSON: {"sdkDir": folder whose node_modules holds the SDK, "url": serve's URL,
// "envId": the client-side ID, "streaming": bool, "contexts": [context…],
// "hashes": [secure mode hash per context, or null], "dataPath": serve's data file,
// "edited": the data to write there (streaming only), "editedFlag": the key it changes,
// "storage": a scratch folder for the SDK's local storage}.
//
// Prints one JSON line: {"sdkVersion", "initMs", "values": [{key: value}…] (all flags,
// one object per context), "changeMs" and "valuesAfter" (streaming only)}, or
// {"error"} and exits 1.

import { createRequire } from 'node:module';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const config = JSON.parse(process.argv[2]);
const require = createRequire(path.join(config.sdkDir, 'package.json'));
const LDClient = require('launchdarkly-node-client-sdk');
const manifest = path.join(config.sdkDir, 'node_modules', 'launchdarkly-node-client-sdk', 'package.json');
const sdkVersion = JSON.parse(readFileSync(manifest, 'utf8')).version;

const INIT_TIMEOUT_S = 5;
const CHANGE_TIMEOUT_MS = 5000;

function start(index) {
  const options = {
    baseUrl: config.url,
    streamUrl: config.url,
    eventsUrl: config.url,
    streaming: config.streaming,
    localStoragePath: config.storage,
    flushInterval: 100000,
    logger: LDClient.basicLogger({ level: 'warn', destination: (line) => console.error(line) }),
  };
  if (config.hashes && config.hashes[index]) {
    options.hash = config.hashes[index];
  }
  return LDClient.initialize(config.envId, config.contexts[index], options);
}

/** Edit the data file atomically; resolves with the milliseconds until `client` saw it. */
function edit(client) {
  return new Promise((resolve, reject) => {
    let edited;
    const timer = setTimeout(
      () => reject(new Error('the edit of the data file never reached the client')),
      CHANGE_TIMEOUT_MS,
    );
    client.on(`change:${config.editedFlag}`, () => {
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
  const out = { sdkVersion, values: [], valuesAfter: [] };
  const clients = [];
  try {
    for (let i = 0; i < config.contexts.length; i += 1) {
      const started = process.hrtime.bigint();
      const client = start(i);
      clients.push(client);
      await client.waitForInitialization(INIT_TIMEOUT_S);
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      out.initMs = Math.max(out.initMs || 0, ms);
      out.values.push(client.allFlags());
      // Feature and summary events, with a tracked flag's full event.
      client.variation(config.editedFlag, null);
      client.track('flagsync-client-custom', { n: i }, 1.5);
    }
    if (config.streaming) {
      out.changeMs = await edit(clients[0]);
      // The other clients' streams got the change too: wait for their values.
      const deadline = Date.now() + CHANGE_TIMEOUT_MS;
      for (const client of clients) {
        const before = JSON.stringify(out.values[clients.indexOf(client)][config.editedFlag]);
        while (JSON.stringify(client.variation(config.editedFlag, null)) === before && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 20));
        }
        out.valuesAfter.push(client.allFlags());
      }
    }
    for (const client of clients) {
      await client.flush();
    }
  } finally {
    for (const client of clients) {
      await client.close();
    }
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.log(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
});
