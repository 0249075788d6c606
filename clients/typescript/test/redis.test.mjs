import { apiSuite } from "./suite.mjs";

apiSuite("redis");
