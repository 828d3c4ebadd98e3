//! Fuzz the service's protocol (`service::protocol`): any bytes read as a
//! frame or decoded as a request never panic, and a request that decodes
//! encodes back to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../../src/service/protocol.rs"]
mod protocol;

fuzz_target!(|data: &[u8]| {
    let _ = protocol::read::<protocol::Reply>(&mut &data[..]);
    if let Ok(Some(req)) = protocol::read::<protocol::Request>(&mut &data[..]) {
        let again = protocol::encode(&req);
        assert_eq!(protocol::read::<protocol::Request>(&mut &again[..]).unwrap(), Some(req));
    }
});
