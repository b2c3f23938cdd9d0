"""A python-zeroconf peer for Piconet's interop stage and discovery benchmark.

Runs inside a network namespace the caller created; binds only the address given.
  python zeroconf_peer.py browse  ADDR TYPE SECONDS          # JSON lines: found / lost
  python zeroconf_peer.py publish ADDR TYPE NAME PORT [K=V ...]  # until SIGTERM/SIGINT, then unregister (goodbye)
TYPE is a DNS-SD type such as _hr-sensor._udp.local.
"""
import json
import signal
import sys
import threading
import time

from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, ServiceStateChange, Zeroconf


def emit(obj):
    obj["t_ms"] = int(time.time() * 1000)
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def browse(addr, stype, seconds):
    zc = Zeroconf(interfaces=[addr], ip_version=IPVersion.V4Only)

    def on_change(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Removed:
            emit({"event": "lost", "name": name})
            return
        info = zeroconf.get_service_info(service_type, name, timeout=3000)
        if info is None:
            emit({"event": "unresolved", "name": name})
            return
        props = {k.decode("utf-8", "replace"): (None if v is None else v.decode("utf-8", "replace"))
                 for k, v in (info.properties or {}).items()}
        emit({"event": "found" if state_change is ServiceStateChange.Added else "updated", "name": name,
              "port": info.port, "server": info.server, "addresses": info.parsed_addresses(), "info": props})

    ServiceBrowser(zc, stype, handlers=[on_change])
    emit({"event": "started"})
    try:
        time.sleep(seconds)
    finally:
        zc.close()


def publish(addr, stype, name, port, pairs):
    import socket
    props = {}
    for p in pairs:
        k, eq, v = p.partition("=")
        props[k] = v if eq else None
    info = ServiceInfo(stype, f"{name}.{stype}", addresses=[socket.inet_aton(addr)], port=port,
                       properties=props, server="zeroconf-peer.local.")
    zc = Zeroconf(interfaces=[addr], ip_version=IPVersion.V4Only)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    zc.register_service(info)
    emit({"event": "registered", "name": info.name})
    done.wait()
    zc.unregister_service(info)  # sends the goodbye
    zc.close()
    emit({"event": "unregistered"})


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "browse":
        browse(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif mode == "publish":
        publish(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6:])
    else:
        sys.exit("usage: zeroconf_peer.py browse|publish ...")
