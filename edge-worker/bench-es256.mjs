// Makes an ES256 identity: a fresh P-256 key, its JWKS and one customer token signed with it.
// Used by scripts/bench-edge to measure sold-out answers with ES256 tokens against HS256 ones.
// Usage: node bench-es256.mjs SUB TTL_SECONDS OUT_DIR -> OUT_DIR/jwks.json and OUT_DIR/token
import { generateKeyPairSync, sign } from "node:crypto";
import { writeFileSync } from "node:fs";

const [sub, ttl, out] = process.argv.slice(2);
const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
const kid = "bench-es256";
const jwk = { ...publicKey.export({ format: "jwk" }), kid, alg: "ES256", use: "sig" };
const b64 = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");
const now = Math.floor(Date.now() / 1000);
const claims = { sub, iat: now, exp: now + Number(ttl) };
const input = `${b64({ alg: "ES256", typ: "JWT", kid })}.${b64(claims)}`;
// JWS ES256 signatures are r || s (64 bytes), not DER (RFC 7518 §3.4).
const sig = sign("sha256", Buffer.from(input), { key: privateKey, dsaEncoding: "ieee-p1363" });
writeFileSync(`${out}/jwks.json`, JSON.stringify({ keys: [jwk] }));
writeFileSync(`${out}/token`, `${input}.${sig.toString("base64url")}`);
