use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/instances")
        .join(name);
    std::fs::read(path).unwrap()
}

/// Written by numpy 2.1 (`np.savez`): float64 3-d, int64 labels, float32, a Fortran-ordered
/// matrix, bool and a 0-d scalar.
#[test]
fn reads_what_numpy_savez_writes() {
    let a = Arrays::from_npz_bytes(&fixture("numpy-mixed.npz")).unwrap();
    assert_eq!(
        a.names().collect::<Vec<_>>(),
        ["W", "X", "flag", "s", "u", "y"]
    );
    let x = a.shaped("X", &[Some(2), Some(3), Some(2)]).unwrap();
    assert_eq!(&x.data[..6], &[1.0, 0.0, 0.0, 1.0, 0.5, 0.5]);
    assert_eq!(a.labels("y", Some(2)).unwrap(), &[1.0, -1.0]);
    assert_eq!(a.vector("u", None).unwrap(), &[1.0, -1.0]);
    // Fortran order is transposed to row-major: W = [[1, 2, 3], [4, 5, 6]]
    let w = a.shaped("W", &[Some(2), Some(3)]).unwrap();
    assert_eq!(w.data, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(w.to_column_major(), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(a.vector("flag", Some(2)).unwrap(), &[1.0, 0.0]);
    assert_eq!(a.scalar("s").unwrap(), 2.5);
}

#[test]
fn reads_savez_compressed() {
    let a = Arrays::from_npz_bytes(&fixture("numpy-compressed.npz")).unwrap();
    assert_eq!(
        a.shaped("X", &[None, Some(3), Some(2)]).unwrap().shape,
        [2, 3, 2]
    );
    assert_eq!(a.labels("y", None).unwrap(), &[1.0, -1.0]);
}

#[test]
fn writing_is_deterministic_and_reads_back_equal() {
    let mut a = Arrays::new();
    a.insert(
        "W",
        Array::from_column_major(2, 3, &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]),
    );
    a.insert("y", Array::vector(&[1.0, -1.0]));
    a.insert("eta", Array::scalar(0.25));
    let bytes = a.to_npz_bytes();
    assert_eq!(bytes, a.clone().to_npz_bytes());
    assert_eq!(Arrays::from_npz_bytes(&bytes).unwrap(), a);
    assert_eq!(a.get("W").unwrap().data, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn json_is_a_second_reader() {
    let a = Arrays::from_json_str(r#"{"X": [[[1, 0], [0, 1]]], "y": [1], "c": -2.0}"#).unwrap();
    assert_eq!(a.get("X").unwrap().shape, [1, 2, 2]);
    assert_eq!(a.scalar("c").unwrap(), -2.0);
    let ragged = Arrays::from_json_str(r#"{"X": [[1, 0], [0]]}"#).unwrap_err();
    assert_eq!(ragged.key, "X[1]");
    let text = Arrays::from_json_str(r#"{"X": [[1, "a"]]}"#).unwrap_err();
    assert_eq!(text.key, "X[0][1]");
}

#[test]
fn errors_name_the_array_and_entry() {
    let mut a = Arrays::new();
    a.insert("X", Array::new(&[2, 2], vec![1.0, 2.0, f64::NAN, 4.0]));
    a.insert("y", Array::vector(&[1.0, 0.5]));
    assert_eq!(a.check_finite().unwrap_err().key, "X[1, 0]");
    assert_eq!(a.labels("y", None).unwrap_err().key, "y[1]");
    let shape = a.shaped("X", &[Some(3), None]).unwrap_err();
    assert!(shape.reason.contains("axis 0 should be 3"), "{shape}");
    let missing = a.require("u").unwrap_err();
    assert_eq!(missing.reason, "missing (the file holds X, y)");
    assert_eq!(a.deny_unknown(&["X"]).unwrap_err().key, "y");
    let not_zip = Arrays::from_npz_bytes(b"hello").unwrap_err();
    assert_eq!(not_zip.key, "(file)");
}
