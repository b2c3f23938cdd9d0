import PiconetRuntime
import Testing

@Suite struct RadioTransportTests {
    @Test func parsesTheThreeTransportsAndWhichRadiosEachUses() throws {
        #expect(try RadioTransport.parse("wifi", adapter: nil) == .wifi)
        #expect(try RadioTransport.parse("bluetooth", adapter: "hci1") == .bluetooth)
        #expect(try RadioTransport.parse("any", adapter: "00:AA:01:00:00:23") == .any)
        #expect(RadioTransport.wifi.usesWiFi && !RadioTransport.wifi.usesBluetooth)
        #expect(!RadioTransport.bluetooth.usesWiFi && RadioTransport.bluetooth.usesBluetooth)
        #expect(RadioTransport.any.usesWiFi && RadioTransport.any.usesBluetooth)
    }

    @Test func misuseIsOneLineSayingWhatIsAccepted() {
        #expect(throws: RadioTransport.Invalid(description: "--transport takes wifi, bluetooth or any, not 'nfc'")) {
            try RadioTransport.parse("nfc", adapter: nil)
        }
        #expect(throws: RadioTransport.Invalid(description: "--adapter needs --transport bluetooth or any")) {
            try RadioTransport.parse("wifi", adapter: "hci0")
        }
        #expect(throws: RadioTransport.Invalid(
            description: "--adapter takes hciN, N or an address like 00:AA:01:00:00:23, not 'usb0'")) {
            try RadioTransport.parse("bluetooth", adapter: "usb0")
        }
    }
}
