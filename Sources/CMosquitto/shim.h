// libmosquitto (Debian libmosquitto-dev 2.0.11, the Eclipse Mosquitto client library) for the hub's
// MQTT export (PiconetMQTT). A well-kept C client driven from our own epoll loop through its socket
// and mosquitto_loop_read/write/misc: no thread of its own. Only the hub links it (not the node).
#ifndef PICONET_MOSQUITTO_SHIM_H
#define PICONET_MOSQUITTO_SHIM_H
#include <mosquitto.h>
#endif
