export { changeKeyState, createKey, keyStateOf, listKeys, rotateKey, KEY_NAME_MAX, ROTATE_GRACE_DEFAULT_S, ROTATE_GRACE_MAX_S, type CreatedKey, type KeyChanged, type KeyStateOf, type KeyVerb, type NewKeyRequest, type Refusal } from './keys.ts';
export { hashPassword, needsRehash, passwordProblem, verifyNobody, verifyPassword, PASSWORD_MAX, PASSWORD_MIN, SCRYPT_PARAMS, type ScryptParams } from './passwords.ts';
export { createUser, isRole, signInAddress, type UserRefusal } from './users.ts';
export { issueLink, newToken, setupUrl, INVITE_LINK_MS, OWNER_LINK_MS } from './links.ts';
