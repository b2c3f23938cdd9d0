#!/usr/bin/env python3
"""Validates Home Assistant discovery messages with Home Assistant's own MQTT discovery schemas.

Run with the Python of a venv that has the `homeassistant` package (the netns-mqtt stage uses
~/.cache/piconet-ha-venv when it exists: `python3 -m venv ~/.cache/piconet-ha-venv &&
~/.cache/piconet-ha-venv/bin/pip install homeassistant`, about 400 MB; 2024.3.3 is the newest for
Debian 12's Python 3.11). Input: "TOPIC PAYLOAD" lines. Each payload goes through the component's
DISCOVERY_SCHEMA (sensor or binary_sensor); a payload it refuses, or a key it silently removes
(the schema drops unknown keys), is a problem. Exit 1 on any problem.
"""
import json
import sys

from homeassistant.components.mqtt import binary_sensor, sensor
from homeassistant.const import __version__

SCHEMAS = {"sensor": sensor.DISCOVERY_SCHEMA, "binary_sensor": binary_sensor.DISCOVERY_SCHEMA}


def main():
    problems, checked, configs = [], 0, {}
    for line in open(sys.argv[1], encoding="utf-8"):
        topic, _, payload = line.rstrip("\n").partition(" ")
        if topic.startswith("homeassistant/") and payload:
            configs[topic] = payload  # the newest of each (retained configs come again on reconnect)
    for topic, payload in sorted(configs.items()):
        parts = topic.split("/")
        if len(parts) < 4:
            problems.append(f"{topic}: not <prefix>/<component>/<object_id>/config")
            continue
        schema = SCHEMAS.get(parts[1])
        if schema is None:
            problems.append(f"{topic}: component {parts[1]} not checked here")
            continue
        config = json.loads(payload)
        try:
            valid = schema(dict(config))
        except Exception as e:  # voluptuous.Invalid and friends
            problems.append(f"{topic}: refused by Home Assistant {__version__}: {e}")
            continue
        dropped = sorted(set(config) - set(valid))
        if dropped:
            problems.append(f"{topic}: keys Home Assistant ignores: {dropped}")
        checked += 1
    for p in problems:
        print(p)
    print(f"{checked} configs valid for Home Assistant {__version__}'s MQTT discovery schemas, {len(problems)} problems")
    sys.exit(1 if problems or checked == 0 else 0)


if __name__ == "__main__":
    main()
