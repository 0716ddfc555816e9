// The headless Chromium the browser tests drive: Debian's package (FLASHGATE_CHROMIUM names
// another executable) through playwright-core, never a browser download. headless: true adds
// --headless; playwright gives the browser a new empty profile; the flags keep it from
// reaching the network in the background.
import { chromium } from "playwright-core";

/** Launches the browser; the caller closes it. */
export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.FLASHGATE_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}
