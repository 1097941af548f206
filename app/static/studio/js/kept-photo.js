// The photo a scene is being made from, kept in this browser (IndexedDB: a photo is too large for
// localStorage) from when the models found no character in it until the first character makes the
// scene: a reload in between shows the photo again instead of losing it. One photo at a time.

const DB = "doodlepod-scenes";
const STORE = "photo";
const KEY = "before-the-scene";

function opened() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

async function run(mode, work) {
  const db = await opened();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const req = work(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  } finally {
    db.close();
  }
}

/** Keep `file` (resolves false where the browser keeps nothing: private mode, storage full). */
export async function keepPhoto(file) {
  try {
    await run("readwrite", (store) => store.put({ blob: file, name: file.name, type: file.type }, KEY));
    return true;
  } catch {
    return false;
  }
}

/** The kept photo as a File, or null. */
export async function keptPhoto() {
  try {
    const kept = await run("readonly", (store) => store.get(KEY));
    return kept ? new File([kept.blob], kept.name || "photo", { type: kept.type || kept.blob.type }) : null;
  } catch {
    return null;
  }
}

export async function forgetPhoto() {
  try {
    await run("readwrite", (store) => store.delete(KEY));
  } catch {
    // nothing kept, or no IndexedDB: nothing to forget
  }
}
