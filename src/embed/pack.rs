//! The packed model form: an ONNX `ModelProto` whose low-bit weight codes travel two to a byte.
//!
//! ONNX (opset 17, which tract reads) has no 4-bit tensor type, so the graph `needle model
//! convert` writes for its grouped precisions holds each weight's codes as an `INT8` tensor
//! (values in −8..=7) and dequantizes them in the graph with per-group scales (see
//! `model::Precision`). On disk and on the wire those codes take half the bytes: every such
//! initializer is marked with [`PACKED_INT4`] in its `doc_string` and its `raw_data` holds the
//! codes as nibbles, element `2i` in the low half of byte `i`, element `2i + 1` in the high
//! half. [`unpack`] expands them back before tract sees the graph, so the engine runs the same
//! graph either way; only the bytes a reader downloads change.
//!
//! A packed file is not a valid ONNX model for other runtimes (its marked tensors are short);
//! it is needle's own model form, and the index stamps its sha256 like any other.

use tract_onnx::pb;

/// `doc_string` of an `INT8` initializer whose `raw_data` holds two 4-bit codes per byte.
pub const PACKED_INT4: &str = "needle:int4-nibbles";

/// Packs 4-bit codes (each in −8..=7) two to a byte, low nibble first.
#[cfg(feature = "native")]
pub fn pack_nibbles(codes: &[i8]) -> Vec<u8> {
    codes
        .chunks(2)
        .map(|pair| {
            debug_assert!(pair.iter().all(|c| (-8..=7).contains(c)), "{pair:?} is not 4-bit");
            let lo = pair[0] as u8 & 0x0f;
            let hi = pair.get(1).map_or(0, |c| (*c as u8 & 0x0f) << 4);
            lo | hi
        })
        .collect()
}

/// The codes of `n` packed elements, sign-extended to `i8`.
fn unpack_nibbles(packed: &[u8], n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    for &b in packed {
        // Sign-extend each nibble: shift it to the top of an i8, then arithmetic-shift back.
        out.push((((b << 4) as i8) >> 4) as u8);
        out.push(((b as i8) >> 4) as u8);
    }
    out.truncate(n);
    out
}

/// Expands every [`PACKED_INT4`] initializer of `model` in place. Returns how many there were
/// (0 for a plain ONNX file, which passes through unchanged). A marked tensor that is not
/// `INT8`, or whose byte count does not match its shape, is an error naming it.
pub fn unpack(model: &mut pb::ModelProto) -> Result<usize, String> {
    let Some(graph) = model.graph.as_mut() else { return Ok(0) };
    let mut unpacked = 0;
    for t in graph.initializer.iter_mut().filter(|t| t.doc_string == PACKED_INT4) {
        if t.data_type != pb::tensor_proto::DataType::Int8 as i32 {
            return Err(format!("packed tensor {} is not int8 (data type {})", t.name, t.data_type));
        }
        let n = t
            .dims
            .iter()
            .try_fold(1usize, |acc, &d| usize::try_from(d).ok().and_then(|d| acc.checked_mul(d)))
            .ok_or_else(|| format!("packed tensor {} has an invalid shape {:?}", t.name, t.dims))?;
        if t.raw_data.len() != n.div_ceil(2) {
            return Err(format!(
                "packed tensor {} holds {} bytes, its shape {:?} needs {}",
                t.name,
                t.raw_data.len(),
                t.dims,
                n.div_ceil(2)
            ));
        }
        t.raw_data = unpack_nibbles(&t.raw_data, n);
        t.doc_string.clear();
        unpacked += 1;
    }
    Ok(unpacked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_round_trip_every_code_and_odd_lengths() {
        let codes: Vec<i8> = (-8..=7).chain([7, -8, 0]).collect();
        for n in [0, 1, 2, 3, codes.len()] {
            let packed = pack_nibbles(&codes[..n]);
            assert_eq!(packed.len(), n.div_ceil(2));
            let back: Vec<i8> = unpack_nibbles(&packed, n).into_iter().map(|b| b as i8).collect();
            assert_eq!(back, codes[..n]);
        }
    }

    fn tensor(dims: &[i64], raw: Vec<u8>, dt: pb::tensor_proto::DataType) -> pb::ModelProto {
        let t = pb::TensorProto {
            name: "w".into(),
            dims: dims.to_vec(),
            data_type: dt as i32,
            raw_data: raw,
            doc_string: PACKED_INT4.into(),
            ..Default::default()
        };
        pb::ModelProto { graph: Some(pb::GraphProto { initializer: vec![t], ..Default::default() }), ..Default::default() }
    }

    #[test]
    fn a_packed_tensor_is_expanded_and_a_damaged_one_named() {
        let mut m = tensor(&[3], pack_nibbles(&[-1, 5, -8]), pb::tensor_proto::DataType::Int8);
        assert_eq!(unpack(&mut m), Ok(1));
        let t = &m.graph.as_ref().map(|g| g.initializer[0].clone()).unwrap_or_default();
        assert_eq!((t.raw_data.clone(), t.doc_string.as_str()), (vec![0xff, 5, 0xf8], ""));
        assert_eq!(unpack(&mut m), Ok(0), "an unpacked model passes through");

        let mut short = tensor(&[5], vec![0; 2], pb::tensor_proto::DataType::Int8);
        assert!(unpack(&mut short).is_err_and(|e| e.contains("packed tensor w holds 2 bytes")));
        let mut float = tensor(&[2], vec![0], pb::tensor_proto::DataType::Float);
        assert!(unpack(&mut float).is_err_and(|e| e.contains("not int8")));
        let mut negative = tensor(&[-2], vec![], pb::tensor_proto::DataType::Int8);
        assert!(unpack(&mut negative).is_err_and(|e| e.contains("invalid shape")));
    }
}
