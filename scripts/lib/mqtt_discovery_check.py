#!/usr/bin/env python3
"""Checks Home Assistant MQTT discovery messages against the documented schema (fields and types).

Input: lines "TOPIC PAYLOAD" (mosquitto_sub -v) for homeassistant/#; the minimum number of configs.
Schema: https://www.home-assistant.io/integrations/mqtt/#mqtt-discovery (topic
<discovery_prefix>/<component>/[<node_id>/]<object_id>/config, object ids [a-zA-Z0-9_-]), and the
sensor / binary_sensor platform options (https://www.home-assistant.io/integrations/sensor.mqtt/,
https://www.home-assistant.io/integrations/binary_sensor.mqtt/): only documented keys, with their types.
Prints one line per problem and a last summary line; exit 1 on any problem.
"""
import json
import re
import sys

COMMON = {
    "name": (str, type(None)), "unique_id": str, "state_topic": str, "value_template": str,
    "availability_topic": str, "payload_available": str, "payload_not_available": str,
    "device": dict, "icon": str, "device_class": str, "qos": int, "expire_after": int,
    "force_update": bool, "entity_category": str, "enabled_by_default": bool, "json_attributes_topic": str,
}
SENSOR = dict(COMMON, unit_of_measurement=str, state_class=str, suggested_display_precision=int)
BINARY = dict(COMMON, payload_on=str, payload_off=str, off_delay=int)
DEVICE = {"identifiers": (list, str), "connections": list, "name": str, "manufacturer": str, "model": str,
          "sw_version": str, "hw_version": str, "via_device": str, "suggested_area": str, "configuration_url": str}
STATE_CLASSES = {"measurement", "total", "total_increasing", "measurement_angle"}
SENSOR_CLASSES = {"battery", "duration", "timestamp", "temperature", "signal_strength", "voltage", "power", "energy"}
BINARY_CLASSES = {"connectivity", "battery", "motion", "occupancy", "problem", "running", "presence", "moving"}
TOPIC = re.compile(r"^homeassistant/(sensor|binary_sensor)/(?:[a-zA-Z0-9_-]+/)?[a-zA-Z0-9_-]+/config$")


def check(topic, payload):
    problems = []
    m = TOPIC.match(topic)
    if not m:
        return [f"{topic}: not <prefix>/<sensor|binary_sensor>/[<node_id>/]<object_id>/config with [a-zA-Z0-9_-] ids"]
    component = m.group(1)
    try:
        c = json.loads(payload)
    except ValueError as e:
        return [f"{topic}: payload is not JSON: {e}"]
    if not isinstance(c, dict):
        return [f"{topic}: payload is not an object"]
    schema = SENSOR if component == "sensor" else BINARY
    for key, value in c.items():
        if key not in schema:
            problems.append(f"{topic}: key {key!r} is not a documented {component} option")
        elif not isinstance(value, schema[key]) or (schema[key] is int and isinstance(value, bool)):
            problems.append(f"{topic}: {key} has type {type(value).__name__}")
    for key in ("unique_id", "state_topic", "device", "availability_topic"):
        if key not in c:
            problems.append(f"{topic}: missing {key} (needed for a device with availability)")
    st = c.get("state_topic", "")
    if isinstance(st, str) and ("+" in st or "#" in st or not st):
        problems.append(f"{topic}: state_topic {st!r} is not a publish topic")
    if "state_class" in c and c["state_class"] not in STATE_CLASSES:
        problems.append(f"{topic}: state_class {c['state_class']!r}")
    if "device_class" in c:
        classes = SENSOR_CLASSES if component == "sensor" else BINARY_CLASSES
        if c["device_class"] not in classes:
            problems.append(f"{topic}: device_class {c['device_class']!r} for {component}")
    if "icon" in c and not str(c["icon"]).startswith("mdi:"):
        problems.append(f"{topic}: icon {c['icon']!r} is not mdi:NAME")
    d = c.get("device")
    if isinstance(d, dict):
        for key, value in d.items():
            if key not in DEVICE:
                problems.append(f"{topic}: device key {key!r} is not documented")
            elif not isinstance(value, DEVICE[key]):
                problems.append(f"{topic}: device.{key} has type {type(value).__name__}")
        ids = d.get("identifiers")
        if not ids or (isinstance(ids, list) and not all(isinstance(i, str) for i in ids)):
            problems.append(f"{topic}: device.identifiers must be a non-empty string or list of strings")
        for key in ("name", "manufacturer", "model"):
            if key not in d:
                problems.append(f"{topic}: device.{key} missing")
    return problems


def main():
    path, minimum = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
    configs, problems, uniques = {}, [], set()
    for line in open(path, encoding="utf-8", errors="replace"):
        topic, _, payload = line.rstrip("\n").partition(" ")
        if not topic.startswith("homeassistant/") or not payload:
            continue
        configs[topic] = payload
    for topic, payload in sorted(configs.items()):
        problems += check(topic, payload)
        try:
            uniques.add(json.loads(payload).get("unique_id"))
        except ValueError:
            pass
    if len(uniques) != len(configs):
        problems.append(f"{len(configs)} configs but {len(uniques)} distinct unique_id values")
    if len(configs) < minimum:
        problems.append(f"only {len(configs)} discovery configs, expected at least {minimum}")
    for p in problems:
        print(p)
    print(f"{len(configs)} discovery configs checked, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
