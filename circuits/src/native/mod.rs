//! Emitters of the variables filecoin's gadgets allocate, computed natively: each writes, in
//! bellperson's allocation order, every value its gadget would, so a circuit's witness can be
//! generated without its constraint system. The PoRep (`porep/native/`), PoSt
//! (`post/native.rs`) and SnapDeals (`snap/native.rs`) generators are built from them; `tests.rs`
//! checks each emitter against its gadget.

pub(crate) mod out;
pub(crate) mod paths;
pub(crate) mod poseidon;
pub(crate) mod sha256;
#[cfg(test)]
pub(crate) mod tests;

/// Logs, once per shape, that a shape has no native generator and goes through the gadgets.
pub(crate) fn through_gadgets(shape: String) {
    static LOGGED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut logged = LOGGED.lock().unwrap_or_else(|e| e.into_inner());
    if !logged.contains(&shape) {
        tracing::info!(
            shape,
            "no native witness generator for this shape; synthesizing through the gadgets"
        );
        logged.push(shape);
    }
}
