//! No credential a GCS or Azure store is configured with shows in an
//! error's `Display` or `Debug`, whatever fails: a store object_store will
//! not build (a malformed key), or a request to an endpoint that is not
//! there (a closed loopback port: no timing involved, the connection is
//! refused at once).

use object_store::ObjectStoreExt;
use weightstream_remote::env::Env;
use weightstream_remote::store::{build_with, classify, runtime};
use weightstream_remote::{RemoteError, RemoteErrorKind, RemoteOptions, RemoteUrl};

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn quick() -> RemoteOptions {
    RemoteOptions { retries: 0, ..Default::default() }
}

/// The error of opening `url`'s object: the build's, or the HEAD's.
fn failure(url: &str, env: &Env) -> RemoteError {
    let u = RemoteUrl::parse(url).unwrap();
    let store = match build_with(&u, &quick(), env) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let location = weightstream_remote::url::location(&u.key);
    match runtime().block_on(store.head(&location)) {
        Ok(_) => panic!("{url}: the HEAD succeeded"),
        Err(e) => classify(&u.object(), &e),
    }
}

fn shows_none(e: &RemoteError, secrets: &[&str]) {
    for text in [e.to_string(), format!("{e:?}"), format!("{:?}", e.clone().into_io())] {
        for s in secrets {
            assert!(!text.contains(s), "{s:?} shows in {text}");
        }
    }
}

const KEY: &str = "c2VjcmV0LWFjY291bnQta2V5LXRoYXQtbXVzdC1uZXZlci1zaG93LTAxMjM0NTY3ODk=";
const SIG: &str = "c2lnbmF0dXJlLW5ldmVyLXNob3du%3D";

#[test]
fn azure_account_keys_and_sas_tokens_never_show() {
    let endpoint = format!("http://127.0.0.1:{}/acct1", closed_port());
    // An account key, through the Azure CLI's variable names.
    let env = Env::of(&[("AZURE_STORAGE_ACCOUNT", "acct1"), ("AZURE_STORAGE_KEY", KEY), ("AZURE_STORAGE_ENDPOINT", &endpoint)]);
    let e = failure("az://models/m.gguf", &env);
    assert_eq!(e.kind, RemoteErrorKind::Unreachable, "{e}");
    assert!(e.to_string().starts_with("az://models/m.gguf: "), "{e}");
    shows_none(&e, &[KEY]);
    // A key that is not base64: object_store refuses it at build.
    let bad_key = "not base64 but a secret all the same";
    let e = failure("az://models/m.gguf", &Env::of(&[("AZURE_STORAGE_ACCOUNT", "acct1"), ("AZURE_STORAGE_KEY", bad_key)]));
    assert_eq!(e.kind, RemoteErrorKind::Denied, "{e}");
    shows_none(&e, &[bad_key]);
    // A connection string, and a SAS token in the URL.
    let cs = format!("DefaultEndpointsProtocol=http;AccountName=acct1;AccountKey={KEY};BlobEndpoint={endpoint};");
    let e = failure("az://models/m.gguf", &Env::of(&[("AZURE_STORAGE_CONNECTION_STRING", &cs)]));
    assert_eq!(e.kind, RemoteErrorKind::Unreachable, "{e}");
    shows_none(&e, &[KEY, &cs]);
    let sas = format!("sv=2021-06-08&ss=b&srt=sco&sp=rl&se=2099-01-01&sig={SIG}");
    let url = format!("https://acct1.blob.core.windows.net/models/m.gguf?{sas}");
    let e = failure(&url, &Env::of(&[("AZURE_STORAGE_ENDPOINT", &endpoint)]));
    assert_eq!(e.kind, RemoteErrorKind::Unreachable, "{e}");
    assert!(e.to_string().starts_with("https://acct1.blob.core.windows.net/models/m.gguf: "), "{e}");
    shows_none(&e, &[SIG, "c2lnbmF0dXJlLW5ldmVyLXNob3du=", &sas]);
    let parsed = RemoteUrl::parse(&url).unwrap();
    assert!(!format!("{parsed:?}").contains(SIG));
    assert!(!format!("{env:?}").contains(KEY), "Env's Debug names variables only");
}

#[test]
fn gcs_service_account_keys_never_show() {
    let pem =
        "-----BEGIN PRIVATE KEY-----\nTUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2N3Z2dTakFnRUFBb0lCQVFD\n-----END PRIVATE KEY-----\n";
    let json = serde_json::json!({
        "type": "service_account", "project_id": "p", "private_key_id": "0123456789abcdef0123456789abcdef",
        "private_key": pem, "client_email": "loader@p.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token",
    })
    .to_string();
    let metadata = format!("127.0.0.1:{}", closed_port());
    let env = Env::of(&[("GOOGLE_SERVICE_ACCOUNT_KEY", &json), ("GCE_METADATA_HOST", &metadata)]);
    let e = failure("gs://models/m.gguf", &env);
    assert!(matches!(e.kind, RemoteErrorKind::Denied | RemoteErrorKind::BadUrl), "{e}");
    assert!(e.to_string().starts_with("gs://models/m.gguf: "), "{e}");
    shows_none(&e, &["TUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2N3Z2dTakFnRUFBb0lCQVFD", "0123456789abcdef0123456789abcdef"]);
}

#[test]
fn an_azure_url_without_an_account_says_how_to_give_one() {
    let e = failure("az://models/m.gguf", &Env::of(&[]));
    assert_eq!(e.kind, RemoteErrorKind::BadUrl, "{e}");
    assert!(e.reason.contains("AZURE_STORAGE_ACCOUNT"), "{e}");
}
