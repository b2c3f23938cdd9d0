// libgpiod (Debian 12: 1.6, libgpiod-dev). Only PiconetLights imports this.
#include <gpiod.h>
