//! A held wait: its headers go out at once and its body is a stream that ends with the frame
//! the decider wakes it with, or at its timeout with the newest confirmed version. The stream
//! owns the waiter's place: when its client goes away the runtime cancels the stream, which
//! gives the place back there and then (the runtime need not fire `request.signal`, and local
//! workerd does not).

use super::*;
use futures::future::{select, Either};
use std::time::Duration;

/// A waiter's place; dropping it (answered, timed out, or cancelled) gives it back.
struct Place {
    inner: Rc<Inner>,
    waiter: WaiterId,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.inner.waiting.borrow_mut().remove(&self.waiter);
        // A drop never runs inside a borrow of the decider (waking only sends), but a place
        // that cannot be given back now is given back when it is next woken.
        if let Ok(mut decider) = self.inner.decider.try_borrow_mut() {
            decider.release(self.waiter);
        }
    }
}

/// The streamed answer of the wait the decider holds as `waiter`: at its timeout, `timeout_body`
/// where given (a held timeline read's), else the newest confirmed record as `role` sees it.
pub(super) fn hold(
    inner: &Rc<Inner>,
    waiter: WaiterId,
    role: Role,
    timeout_ms: u64,
    timeout_body: Option<Rc<str>>,
) -> Result<web_sys::Response> {
    let (tx, woken) = futures::channel::oneshot::channel();
    inner.waiting.borrow_mut().insert(waiter, tx);
    let place = Place { inner: inner.clone(), waiter };
    let timeout = Delay::from(Duration::from_millis(timeout_ms));
    let body = async move {
        let frame = match select(woken, timeout).await {
            Either::Left((Ok(frame), _)) => Some(frame),
            _ => None,
        };
        // The timeout: the newest version whose commit is confirmed (the object read or
        // published one before any waiter could be held).
        let frame = frame.or(timeout_body).or_else(|| {
            let published = place.inner.decider.borrow().published().cloned();
            published.map(|h| place.inner.frame(&h, role))
        });
        drop(place);
        match frame {
            Some(frame) => Ok::<Vec<u8>, Error>(frame.as_bytes().to_vec()),
            None => Err(Error::RustError("a wait's timeout with nothing published".into())),
        }
    };
    crate::http::streamed_json(Box::pin(body))
}
