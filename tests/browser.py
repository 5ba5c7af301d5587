"""Headless Chromium for the report tests: Debian's ``chromium`` and ``chromium-driver``, installed on demand.

``ensure_chromium()`` finds them on PATH, or installs them with apt-get (as .ci/run does); it skips the test with
the reason only when installing is impossible (no apt-get, not root, or the install fails). ``open_browser()``
starts Chromium through selenium with every host name unresolvable, so a page that reaches for the network logs an
error, and with the browser console recorded; ``console_errors()`` reads what it logged at error level.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest

PACKAGES = ("chromium", "chromium-driver")
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _found() -> tuple[str, str] | None:
    browser = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def ensure_chromium() -> tuple[str, str]:
    """(chromium, chromedriver) paths; installs Debian's packages when missing, skips when that cannot be done."""
    found = _found()
    if found:
        return found
    if not shutil.which("apt-get"):
        pytest.skip(f"headless Chromium is not installed and there is no apt-get to install {' and '.join(PACKAGES)}")
    if os.geteuid() != 0:
        pytest.skip(f"headless Chromium is not installed; installing {' and '.join(PACKAGES)} with apt-get needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]):
        try:
            run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200, check=False)
        except subprocess.TimeoutExpired:
            pytest.skip(f"installing headless Chromium timed out: {' '.join(command)}")
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:]
            pytest.skip(f"headless Chromium could not be installed: {' '.join(command)}: {' '.join(tail)}")
    found = _found()
    if not found:
        pytest.skip(f"{' and '.join(PACKAGES)} installed, but chromium or chromedriver is not on PATH")
    return found


def open_browser(width: int = 1400, height: int = 1800) -> Any:
    """A headless Chromium (selenium WebDriver) that records its console and cannot resolve any host name."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = ensure_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # tests run as root in containers
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={width},{height}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # the page must need no network
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def console_errors(browser: Any) -> list[str]:
    """Messages the page logged at error level (script errors, failed loads) since the last call."""
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
