// PiconetSensors — samples on the wire and the sources that make them (pure: no Glibc, no Foundation).
//
//   features:  PiconetHub (aggregation)  ←  PiconetSensors (this module)
//   base:      PiconetWire (ByteReader/ByteWriter, FrameHeader)   PiconetLoop (Instant)
//
// - HeartRateMeasurement: the Bluetooth 0x2A37 byte format, as real chest straps send it.
// - MotionSample / Vector3: accelerometer (mg) and gyroscope (mdps), int16 per axis.
// - SampleBatch / NodeSummary / SensorMessage: the unreliable sample batches and the
//   reliable summary/heartbeat, carried in `.samples` / `.summary` frames.
// - SampleBatcher: packs samples into batches ≤ a payload limit and the path MTU.
// - SampleSource / SimulatedWearable: seeded heart-rate and motion simulation.
