// BlueZ user-space headers (Debian: libbluetooth-dev). Only the OS edge imports this.
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/l2cap.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
