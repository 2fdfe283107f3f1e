#!/usr/bin/env bash
# Debian's Chromium for the browser tests (Playwright cannot download browsers here),
# and a CJK font so Chinese text renders in the inspector's screenshots.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
fc-list 2>/dev/null | grep -qi "wenquanyi\|noto sans cjk" || missing+=(fonts-wqy-microhei)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
